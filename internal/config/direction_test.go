package config

import "testing"

func TestDirection(t *testing.T) {
	for _, c := range []struct {
		d          Direction
		name, side string
		rate       int
	}{
		{Download, "download", "ingress", 40000},
		{Upload, "upload", "egress", 8000},
	} {
		r := Rates{Download: 40000, Upload: 8000}
		if c.d.String() != c.name || c.d.Side() != c.side || r.Of(c.d) != c.rate {
			t.Errorf("%d: %q %q %d, want %q %q %d", c.d, c.d, c.d.Side(), r.Of(c.d), c.name, c.side, c.rate)
		}
		r.Set(c.d, 1)
		if r.Of(c.d) != 1 || r.Download+r.Upload != 1+48000-c.rate {
			t.Errorf("Set(%s, 1) = %+v", c.d, r)
		}
		q := Queue{Download: 40000, Upload: 8000}
		q.SetRate(c.d, 7)
		if q.Rate(c.d) != 7 || q.Download+q.Upload != 7+48000-c.rate {
			t.Errorf("SetRate(%s, 7): %d/%d", c.d, q.Download, q.Upload)
		}
	}
	if Directions != [2]Direction{Download, Upload} || Download != 0 {
		t.Error("Directions must index [2] arrays as Rates orders them")
	}
}
