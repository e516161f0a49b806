package accept

import (
	"strings"
	"testing"
)

func meas(down, up, bidir Phase) Measurement {
	down.Name, up.Name, bidir.Name = Download, Upload, Bidir
	return Measurement{Tool: "t", IdleRTT: 20, Phases: []Phase{down, up, bidir}}
}

func ptr(v float64) *float64 { return &v }

func failed(cs []Check) []string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestShaped(t *testing.T) {
	calm := Phase{AddedMedian: 1.2, AddedP95: 4, DownMbps: 34}
	tests := []struct {
		name string
		m    Measurement
		want []string // failing checks
	}{
		{"calm", meas(calm, calm, calm), nil},
		{"edge values pass", meas(Phase{AddedMedian: 5, AddedP95: 15, DownMbps: 32.3}, calm, calm), nil},
		{"bloated upload", meas(calm, Phase{AddedMedian: 80, AddedP95: 120}, calm),
			[]string{"upload median added ms", "upload p95 added ms"}},
		{"spiky bidir", meas(calm, calm, Phase{AddedMedian: 3, AddedP95: 31}), []string{"bidirectional p95 added ms"}},
		// bidirectional has its own bar: 10/30
		{"bidir at its edge", meas(calm, calm, Phase{AddedMedian: 10, AddedP95: 30}), nil},
		{"bidir median", meas(calm, calm, Phase{AddedMedian: 10.1, AddedP95: 20}), []string{"bidirectional median added ms"}},
		{"download held to 5/15", meas(Phase{AddedMedian: 5.1, AddedP95: 15.1, DownMbps: 34}, calm, calm),
			[]string{"download median added ms", "download p95 added ms"}},
		// The first-10 s p95 is a diagnostic: it neither fails nor rescues a run.
		{"start transient alone", meas(Phase{AddedMedian: 1, AddedP95: 4, AddedP95First: ptr(30), DownMbps: 34}, calm, calm), nil},
		{"spiky steady state", meas(calm, calm, Phase{AddedMedian: 3, AddedP95: 35, AddedP95First: ptr(4)}), []string{"bidirectional p95 added ms"}},
		{"slow download", meas(Phase{AddedMedian: 1, AddedP95: 2, DownMbps: 32.2}, calm, calm), []string{"download goodput Mbit/s"}},
		{"missing phase", Measurement{Phases: []Phase{{Name: Download, DownMbps: 34}, {Name: Upload}}},
			[]string{"bidirectional phase present"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := Shaped(tt.m, 38000)
			got := failed(cs)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("failed = %q, want %q\n%v", got, tt.want, cs)
			}
			if Passed(cs) != (len(tt.want) == 0) {
				t.Errorf("Passed = %v with failures %q", Passed(cs), got)
			}
		})
	}
}

func TestUnshaped(t *testing.T) {
	for _, tt := range []struct {
		bidir float64
		ok    bool
	}{{250, true}, {200, true}, {199.9, false}, {3, false}} {
		m := meas(Phase{}, Phase{}, Phase{AddedMedian: tt.bidir})
		if got := Passed(Unshaped(m, 200)); got != tt.ok {
			t.Errorf("bidir %.1f ms: passed = %v, want %v", tt.bidir, got, tt.ok)
		}
	}
	if Passed(Unshaped(Measurement{}, 200)) {
		t.Error("a run without a bidirectional phase passed")
	}
}

func TestCross(t *testing.T) {
	ref := meas(Phase{Latency: 5, DownMbps: 36}, Phase{Latency: 300, UpMbps: 7.5}, Phase{Latency: 22, DownMbps: 30, UpMbps: 7})
	tests := []struct {
		name string
		mod  func(m *Measurement)
		want []string
	}{
		{"same", func(*Measurement) {}, nil},
		{"within 1 ms floor", func(m *Measurement) { m.Phases[0].Latency = 5.9 }, nil},
		{"within 10% above floor", func(m *Measurement) { m.Phases[1].Latency = 329 }, nil},
		{"latency off", func(m *Measurement) { m.Phases[0].Latency = 6.2 }, []string{"download median RTT ms"}},
		{"goodput 4% low", func(m *Measurement) { m.Phases[0].DownMbps = 34.6 }, nil},
		{"goodput 6% low", func(m *Measurement) { m.Phases[2].UpMbps = 6.5 }, []string{"bidirectional upload Mbit/s"}},
		{"idle off", func(m *Measurement) { m.IdleRTT = 25 }, []string{"idle RTT ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := meas(ref.Phases[0], ref.Phases[1], ref.Phases[2])
			tt.mod(&m)
			if got := failed(Cross(m, ref)); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("failed = %q, want %q", got, tt.want)
			}
		})
	}
}

// Unsure is tune's borderline rule against the lab's bars: within 25 % of
// a bar either way, the bidirectional phase against its own 10/30.
func TestUnsure(t *testing.T) {
	for _, c := range []struct {
		p    Phase
		want bool
	}{
		{Phase{Name: Download, AddedMedian: 2, AddedP95: 8}, false},
		{Phase{Name: Download, AddedMedian: 4, AddedP95: 8}, true},    // a pass near 5
		{Phase{Name: Download, AddedMedian: 6.1, AddedP95: 12}, true}, // a miss within 25 %
		{Phase{Name: Download, AddedMedian: 7, AddedP95: 12}, false},  // a clear miss
		{Phase{Name: Bidir, AddedMedian: 6, AddedP95: 20}, false},     // clear of 10/30
		{Phase{Name: Bidir, AddedMedian: 10.1, AddedP95: 21.2}, true}, // a CI miss by 1 % of the bar
		{Phase{Name: Bidir, AddedMedian: 5, AddedP95: 40}, false},     // p95 a third over
	} {
		if got := Unsure(c.p); got != c.want {
			t.Errorf("Unsure(%s +%.1f/+%.1f) = %v, want %v", c.p.Name, c.p.AddedMedian, c.p.AddedP95, got, c.want)
		}
	}
}

func TestMean(t *testing.T) {
	a := Phase{Name: Bidir, AddedMedian: 10.1, AddedP95: 21.2, AddedDown: 8, AddedUp: 2, DownMbps: 34, AddedP95First: ptr(20), Collision: "x"}
	b := Phase{Name: Bidir, AddedMedian: 6.1, AddedP95: 14.8, AddedDown: 4, AddedUp: 2, DownMbps: 36, AddedP95First: ptr(10), Run: "again-bidirectional"}
	m := Mean(a, b)
	if m.AddedMedian != 8.1 || m.AddedP95 != 18 || m.AddedDown != 6 || m.AddedUp != 2 || m.DownMbps != 35 || *m.AddedP95First != 15 {
		t.Errorf("mean %+v", m)
	}
	if m.Again != "again-bidirectional" || m.Run != "" || m.Collision != "x" {
		t.Errorf("runs and gauge: %+v (want the first's, with the second's run as Again)", m)
	}
}

// A download whose goodput the lab could not measure (Phase.GoodputUnproven)
// leaves that bar ungraded and no other.
func TestShapedUnproven(t *testing.T) {
	calm := Phase{AddedMedian: 1.2, AddedP95: 4, DownMbps: 34}
	why := "the guest had no headroom on each of 3 tries"
	tests := []struct {
		name         string
		down         Phase
		bidir        Phase
		passed, some bool // Passed, Unproven
	}{
		{"slow download, unproven", Phase{AddedMedian: 1, AddedP95: 2, DownMbps: 30, GoodputUnproven: why}, calm, true, true},
		{"met anyway: graded", Phase{AddedMedian: 1, AddedP95: 2, DownMbps: 34, GoodputUnproven: why}, calm, true, false},
		{"a latency miss beside it still fails", Phase{AddedMedian: 1, AddedP95: 2, DownMbps: 30, GoodputUnproven: why},
			Phase{AddedMedian: 11, AddedP95: 20}, false, true},
		{"slow download, graded", Phase{AddedMedian: 1, AddedP95: 2, DownMbps: 30}, calm, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := Shaped(meas(tt.down, calm, tt.bidir), 38000)
			if Passed(cs) != tt.passed || Unproven(cs) != tt.some {
				t.Errorf("Passed %v, Unproven %v; want %v, %v\n%v", Passed(cs), Unproven(cs), tt.passed, tt.some, cs)
			}
			for _, c := range cs {
				if c.Name == "download goodput Mbit/s" && tt.some != strings.HasPrefix(c.String(), "NOT GRADED download goodput Mbit/s = 30.0 (want >= 32.3 (85% of 38000 kbit/s)): "+why) {
					t.Errorf("%q", c)
				}
			}
		})
	}
}
