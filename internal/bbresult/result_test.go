package bbresult

import "testing"

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
