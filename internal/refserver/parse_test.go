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
	if err != nil || down != (Theirs{RPM: 32088, Conns: 9, Mbps: 2892.801}) || up != (Theirs{RPM: 16443, Conns: 16, Mbps: 8730.687}) {
		t.Errorf("Goresponsiveness = %v, %v, %v; want 32088 on 9, 16443 on 16", down, up, err)
	}
	// through the lab's 500 ms of unshaped queue: no probe in the
	// download's last window, and an upload whose load generator gave up
	bloated, _ := os.ReadFile("testdata/goresponsiveness-bloated.out")
	down, up, err = Goresponsiveness(bloated)
	if err != nil || !math.IsNaN(down.RPM) || down.Conns != 16 || up != (Theirs{RPM: 1073, Conns: 0}) {
		t.Errorf("Goresponsiveness = %v, %v, %v; want NaN on 16, 1073 on 0", down, up, err)
	}
	if _, _, err := Goresponsiveness(theirs[:len(theirs)/2]); err == nil {
		t.Error("goresponsiveness output without an upload read")
	}
	// with --debug (sqmkit-lab rpm, cable unshaped: its responsiveness
	// bucket lines and its results), each direction's final window: the
	// rounds it started between its bucket bounds, and those that returned
	debug, _ := os.ReadFile("testdata/goresponsiveness-debug.out")
	down, up, err = Goresponsiveness(debug)
	if err != nil || down != (Theirs{RPM: 73, Conns: 16, Rounds: 39, Kept: 8, Mbps: 35.895}) || up != (Theirs{RPM: 85, Conns: 16, Rounds: 40, Kept: 18, Mbps: 7.492}) {
		t.Errorf("Goresponsiveness --debug = %+v, %+v, %v; want 73 on 16 keeping 8 of 39 rounds, 85 on 16 keeping 18 of 40", down, up, err)
	}
	// ids within a direction's bounds that another direction reserved are
	// not its rounds (run in parallel, the directions' ids interleave)
	interleaved := "Download: Reserving a responsiveness bucket with id 5.\nUpload: Reserving a responsiveness bucket with id 6.\n" +
		"Download: Filling a responsiveness bucket with id 5 with value {}.\nResults:\n" +
		"Download:\n\tusing 4 parallel connections.\n\tBucket bounds: (5, 6)\n\tRPM: 50 (Single-Sided 95% Trimmed Mean)\n" +
		"Upload:\n\tusing 4 parallel connections.\n\tBucket bounds: (5, 6)\n\tRPM: 60 (Single-Sided 95% Trimmed Mean)\n"
	down, up, err = Goresponsiveness([]byte(interleaved))
	if err != nil || down.Rounds != 1 || down.Kept != 1 || up.Rounds != 1 || up.Kept != 0 {
		t.Errorf("Goresponsiveness, directions interleaved = %+v, %+v, %v; want 1 of 1 kept, 0 of 1", down, up, err)
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
