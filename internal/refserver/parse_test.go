package refserver

import (
	"math"
	"os"
	"testing"
)

// TestParse reads the RPM that goresponsiveness and `sqmkit test --rpm`
// printed against one server (testdata: sqmkit serve --rpm on loopback;
// and goresponsiveness against the reference server in sqmkit-lab rpm),
// and aggregates sqmkit's latencies as goresponsiveness does.
func TestParse(t *testing.T) {
	theirs, _ := os.ReadFile("testdata/goresponsiveness.out")
	down, up, err := Goresponsiveness(theirs)
	if err != nil || down != (Theirs{32088, 9}) || up != (Theirs{16443, 16}) {
		t.Errorf("Goresponsiveness = %v, %v, %v; want 32088 on 9, 16443 on 16", down, up, err)
	}
	// through the lab's 500 ms of unshaped queue: no probe in the
	// download's last window, and an upload whose load generator gave up
	bloated, _ := os.ReadFile("testdata/goresponsiveness-bloated.out")
	down, up, err = Goresponsiveness(bloated)
	if err != nil || !math.IsNaN(down.RPM) || down.Conns != 16 || up != (Theirs{1073, 0}) {
		t.Errorf("Goresponsiveness = %v, %v, %v; want NaN on 16, 1073 on 0", down, up, err)
	}
	if _, _, err := Goresponsiveness(theirs[:len(theirs)/2]); err == nil {
		t.Error("goresponsiveness output without an upload read")
	}
	ours, _ := os.ReadFile("testdata/sqmkit-rpm.out")
	st, err := Stages(ours)
	if err != nil {
		t.Fatal(err)
	}
	want := []Stage{{"download", 15102, 0.1, 4.4, 4.6, 5.8, 9}, {"upload", 16703, 0.5, 3.7, 3.2, 6.7, 5}}
	for i, s := range st {
		if s != want[i] {
			t.Errorf("stage %d = %+v, want %+v", i, s, want[i])
		}
	}
	// 60000 / ((5.8 + (0.1+4.4+4.6)/3) / 2)
	if got := st[0].EarlierDraft(); math.Abs(got-60000/((5.8+9.1/3)/2)) > 1e-9 {
		t.Errorf("EarlierDraft = %v", got)
	}
	if _, err := Stages(ours[:len(ours)-40]); err == nil {
		t.Error("sqmkit output without an upload read")
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		want  bool
	}{{1, true}, {0.75, true}, {1.25, true}, {0.74, false}, {1.26, false}, {math.NaN(), false}, {math.Inf(1), false}} {
		if got := Within(tc.ratio, Band); got != tc.want {
			t.Errorf("Within(%v, %v) = %v, want %v", tc.ratio, Band, got, tc.want)
		}
	}
}
