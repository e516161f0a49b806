package refserver

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCompareHoldsSqmkitToTheirs: goresponsiveness runs first at its own
// maximum, then sqmkit once for each count of connections it ended with
// (testdata: 9 down, 16 up; through 500 ms of bloat, 16 down and a load
// generator that gave up on the upload, held to the default), and each
// direction is compared with the run held to its count.
func TestCompareHoldsSqmkitToTheirs(t *testing.T) {
	for _, tc := range []struct {
		theirs string
		runs   []string // sqmkit's --rpm-conns, in order
		ours   [2]float64
	}{
		{"testdata/goresponsiveness.out", []string{"9", "16"}, [2]float64{109, 1016}},
		{"testdata/goresponsiveness-bloated.out", []string{"16"}, [2]float64{116, 1016}},
	} {
		t.Run(tc.theirs, func(t *testing.T) {
			out, err := os.ReadFile(tc.theirs)
			if err != nil {
				t.Fatal(err)
			}
			var runs []string
			befores := 0
			run := func(argv ...string) (string, error) {
				switch argv[0] {
				case "/gr":
					if !slices.Equal(argv[1:], GoresponsivenessArgs("https://s/config")) {
						t.Errorf("goresponsiveness ran with %q", argv[1:])
					}
					return string(out), nil
				case "/sqmkit":
					n := argv[len(argv)-1]
					if !slices.Contains(argv, "--rpm-conns") {
						t.Errorf("sqmkit ran without --rpm-conns: %q", argv)
					}
					runs = append(runs, n)
					// the RPM says which run a stage came from: 100 + connections, up 1000 +
					return fmt.Sprintf("Note: download: 1%02s RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n"+
						"Note: upload: 10%02s RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n", n, n, n, n), nil
				}
				return "", fmt.Errorf("ran %q", argv)
			}
			c, err := Compare(run, "/gr", "/sqmkit", "https://s/config", func() error { befores++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(runs, tc.runs) || befores != 1+len(tc.runs) || len(c.Outputs) != 1+len(tc.runs) {
				t.Errorf("sqmkit runs %q, %d settles, %d outputs; want %q, one settle and one output each", runs, befores, len(c.Outputs), tc.runs)
			}
			if c.Ours[0].RPM != tc.ours[0] || c.Ours[1].RPM != tc.ours[1] {
				t.Errorf("ours = %v, %v RPM; want %v", c.Ours[0].RPM, c.Ours[1].RPM, tc.ours)
			}
		})
	}
}

// TestCompareStops: a command that fails, or a settle that does, ends the
// comparison with what ran kept.
func TestCompareStops(t *testing.T) {
	out, _ := os.ReadFile("testdata/goresponsiveness.out")
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		failAt  string // the command that fails
		named   string // in the error
		settles int    // settles that succeed
		outputs int
	}{
		{"goresponsiveness fails", "/gr", "goresponsiveness", 9, 1},
		{"sqmkit fails", "/sqmkit", "sqmkit-rpm-9", 9, 2},
		{"second settle fails", "", "boom", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(argv ...string) (string, error) {
				if argv[0] == tc.failAt {
					return "its output", boom
				}
				if argv[0] == "/gr" {
					return string(out), nil
				}
				return "", nil
			}
			settles := 0
			c, err := Compare(run, "/gr", "/sqmkit", "u", func() error {
				if settles++; settles > tc.settles {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) || len(c.Outputs) != tc.outputs {
				t.Errorf("err %v, %d outputs; want boom, %d", err, len(c.Outputs), tc.outputs)
			}
			if err == nil || !strings.Contains(err.Error(), tc.named) {
				t.Errorf("err %v does not name the command", err)
			}
		})
	}
}
