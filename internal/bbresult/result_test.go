package bbresult

import (
	"math"
	"testing"
)

func TestGradeBoundaries(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want string
	}{
		{-1, "A+"}, {0, "A+"}, {4.99, "A+"}, {5, "A"}, {29.9, "A"}, {30, "B"},
		{59.9, "B"}, {60, "C"}, {199.9, "C"}, {200, "D"}, {399.9, "D"}, {400, "F"}, {5000, "F"},
	} {
		if got := Grade(c.ms); got != c.want {
			t.Errorf("Grade(%v) = %q, want %q", c.ms, got, c.want)
		}
	}
}

func TestFamilyName(t *testing.T) {
	for in, want := range map[string]string{"ipv4": "IPv4", "ipv6": "IPv6", "": "family -", "inet9": "family inet9"} {
		if got := FamilyName(in); got != want {
			t.Errorf("FamilyName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCollidedFlow(t *testing.T) {
	for _, c := range []struct {
		name  string
		flows []float64
		want  int // -1: none
	}{
		{"one flow", []float64{9}, -1},
		{"two flows", []float64{0.5, 9}, -1},
		{"all calm", []float64{0.4, 0.9, 0.6, 1.1}, -1},
		{"all queued alike", []float64{3.4, 4.1, 3.8, 3.9}, -1},
		// fq_codel at 38 Mbit/s: a bulk flow's bucket sits near CoDel's 5 ms target
		{"download collision", []float64{0.5, 0.7, 6.6, 0.4}, 2},
		// 7.6 Mbit/s shared by eight flows: one full-size packet of the bulk flow is 14 ms
		{"upload collision", []float64{17.9, 1.0, 1.2, 0.8}, 0},
		{"bidirectional collision", []float64{3.0, 3.5, 4.0, 8.1}, 3},
		{"gap under 3 ms", []float64{0.5, 0.7, 3.2, 0.4}, -1},
		{"under twice the next", []float64{4.0, 4.5, 8.5, 4.2}, -1},
		{"two collided: not one flow's luck", []float64{7.0, 0.5, 7.2, 0.6}, -1},
	} {
		f, ok := Phase{FlowsAdded: c.flows}.CollidedFlow()
		if (c.want < 0) == ok || ok && f != c.want {
			t.Errorf("%s: flow %d %v, want %d", c.name, f, ok, c.want)
		}
	}
}

func TestFixedNoNegativeZero(t *testing.T) {
	for _, c := range []struct {
		v      float64
		d      int
		fixed  string
		signed string
	}{
		{-0.04, 1, "0.0", "+0.0"}, {-0.4, 0, "0", "+0"}, {math.Copysign(0, -1), 2, "0.00", "+0.00"},
		{-0.06, 1, "-0.1", "-0.1"}, {2.25, 1, "2.2", "+2.2"}, {-12.69, 0, "-13", "-13"},
	} {
		if got := Fixed(c.v, c.d); got != c.fixed {
			t.Errorf("Fixed(%v, %d) = %q, want %q", c.v, c.d, got, c.fixed)
		}
		if got := Signed(c.v, c.d); got != c.signed {
			t.Errorf("Signed(%v, %d) = %q, want %q", c.v, c.d, got, c.signed)
		}
	}
}
