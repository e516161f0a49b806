package refserver

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCompareHoldsSqmkitToTheirs: goresponsiveness runs first at its own
// maximum, then sqmkit, at its probe rate, once for each count of
// connections it ended with (testdata: 9 down, 16 up; through 500 ms of
// bloat, 16 down and a load generator that gave up on the upload, held to
// the default), and each direction is compared with the run held to its
// count. Where sqmkit's own stop ended below that count, goresponsiveness
// runs again for that direction held to sqmkit's.
func TestCompareHoldsSqmkitToTheirs(t *testing.T) {
	for _, tc := range []struct {
		theirs string
		stop   int      // where sqmkit's own stop ends, 0: at the count it is held to
		runs   []string // sqmkit's --rpm-conns, then goresponsiveness's --rpm.mnp, in order
		again  int      // goresponsiveness's first run again: a direction without a figure
		ours   [2]float64
		theirN [2]int
	}{
		{"testdata/goresponsiveness.out", 0, []string{"9", "16"}, 0, [2]float64{109, 1016}, [2]int{9, 16}},
		{"testdata/goresponsiveness-bloated.out", 0, []string{"16"}, 1, [2]float64{116, 1016}, [2]int{16, 0}},
		{"testdata/goresponsiveness.out", 14, []string{"9", "16", "mnp 14"}, 0, [2]float64{109, 1014}, [2]int{9, 14}},
	} {
		t.Run(tc.theirs, func(t *testing.T) {
			out, err := os.ReadFile(tc.theirs)
			if err != nil {
				t.Fatal(err)
			}
			var runs []string
			befores := 0
			run := func(argv ...string) (string, error) {
				n := argv[len(argv)-1]
				switch argv[0] {
				case "/gr":
					if slices.Equal(argv[1:], GoresponsivenessArgs("https://s/config", 0, "")) {
						return string(out), nil
					}
					m, _ := strconv.Atoi(n)
					if !slices.Equal(argv[1:], GoresponsivenessArgs("https://s/config", m, "")) {
						t.Errorf("goresponsiveness ran with %q", argv[1:])
					}
					runs = append(runs, "mnp "+n)
					return fmt.Sprintf("Download:\n\tusing %s parallel connections.\n\tRPM: 1 (P90)\n\tRPM: 5%s (Single-Sided 95%% Trimmed Mean)\n"+
						"Upload:\n\tusing %s parallel connections.\n\tRPM: 1 (P90)\n\tRPM: 6%s (Single-Sided 95%% Trimmed Mean)\n", n, n, n, n), nil
				case "/sqmkit":
					if i := slices.Index(argv, "--rpm-rate"); !slices.Contains(argv, "--rpm-conns") || i < 0 || argv[i+1] != strconv.Itoa(ProbeRounds) {
						t.Errorf("sqmkit ran without --rpm-conns, or not held to goresponsiveness's %d probe rounds a second: %q", ProbeRounds, argv)
					}
					runs = append(runs, n)
					if held, _ := strconv.Atoi(n); tc.stop > 0 && held > tc.stop {
						n = strconv.Itoa(tc.stop)
					}
					// the RPM says which run a stage came from: 100 + connections, up 1000 +
					return fmt.Sprintf("Note: download: 1%02s RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n"+
						"Note: upload: 10%02s RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n", n, n, n, n), nil
				}
				return "", fmt.Errorf("ran %q", argv)
			}
			c, err := Compare(run, "/gr", "/sqmkit", "https://s/config", "", func() error { befores++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if n := 1 + tc.again + len(tc.runs); !slices.Equal(runs, tc.runs) || befores != n || len(c.Outputs) != n {
				t.Errorf("runs %q, %d settles, %d outputs; want %q, %d more, one settle and one output each", runs, befores, len(c.Outputs), tc.runs, tc.again)
			}
			if c.Ours[0].RPM != tc.ours[0] || c.Ours[1].RPM != tc.ours[1] || c.Theirs[0].Conns != tc.theirN[0] || c.Theirs[1].Conns != tc.theirN[1] {
				t.Errorf("ours = %v, %v RPM, theirs on %d, %d; want %v, on %v", c.Ours[0].RPM, c.Ours[1].RPM, c.Theirs[0].Conns, c.Theirs[1].Conns, tc.ours, tc.theirN)
			}
		})
	}
}

// TestCompareRunsAgain: a goresponsiveness run where a direction it ran
// for got no figure (NaN, or a load generator that gave up) runs once more,
// and each direction keeps the first figure measured; a second miss is
// kept as no figure.
func TestCompareRunsAgain(t *testing.T) {
	gr := func(down, up string, dn, un int) string {
		return fmt.Sprintf("Download:\n\tusing %d parallel connections.\n\tRPM: 1 (P90)\n\tRPM: %s (Single-Sided 95%% Trimmed Mean)\n"+
			"Upload:\n\tusing %d parallel connections.\n\tRPM: 1 (P90)\n\tRPM: %s (Single-Sided 95%% Trimmed Mean)\n", dn, down, un, up)
	}
	for _, tc := range []struct {
		name  string
		outs  []string // goresponsiveness's, in the order it runs
		stop  int      // where sqmkit's own stop ends, 0: at the count it is held to
		names []string // goresponsiveness's runs
		want  [2]Theirs
	}{
		{"both measured", []string{gr("50", "60", 16, 16)}, 0,
			[]string{"goresponsiveness"}, [2]Theirs{{RPM: 50, Conns: 16}, {RPM: 60, Conns: 16}}},
		{"a NaN, then a figure", []string{gr("NaN", "60", 16, 16), gr("51", "61", 16, 16)}, 0,
			[]string{"goresponsiveness", "goresponsiveness-again"}, [2]Theirs{{RPM: 51, Conns: 16}, {RPM: 60, Conns: 16}}},
		{"gave up twice", []string{gr("50", "80", 16, 0), gr("NaN", "81", 16, 0)}, 0,
			[]string{"goresponsiveness", "goresponsiveness-again"}, [2]Theirs{{RPM: 50, Conns: 16}, {RPM: 81, Conns: 0}}},
		{"held to sqmkit's count, a NaN, then a figure", []string{gr("50", "60", 16, 16), gr("NaN", "62", 14, 14), gr("55", "63", 14, 14), gr("56", "64", 14, 14)}, 14,
			[]string{"goresponsiveness", "goresponsiveness-download-14", "goresponsiveness-download-14-again", "goresponsiveness-upload-14"}, [2]Theirs{{RPM: 55, Conns: 14}, {RPM: 64, Conns: 14}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs := slices.Clone(tc.outs)
			run := func(argv ...string) (string, error) {
				if argv[0] == "/gr" {
					if len(outs) == 0 {
						return "", fmt.Errorf("goresponsiveness ran more than %d times", len(tc.outs))
					}
					out := outs[0]
					outs = outs[1:]
					return out, nil
				}
				n := argv[len(argv)-1]
				if tc.stop > 0 {
					n = strconv.Itoa(tc.stop)
				}
				return fmt.Sprintf("Note: download: 1 RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n"+
					"Note: upload: 1 RPM on %s connections (high confidence): TCP 1, TLS 2, GET 3 ms on new connections, 4 ms on loaded ones\n", n, n), nil
			}
			c, err := Compare(run, "/gr", "/sqmkit", "https://s/config", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range c.Outputs {
				if strings.HasPrefix(o.Name, "goresponsiveness") {
					names = append(names, o.Name)
				}
			}
			if !slices.Equal(names, tc.names) || c.Theirs != tc.want {
				t.Errorf("goresponsiveness ran as %q and measured %v; want %q, %v", names, c.Theirs, tc.names, tc.want)
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
			c, err := Compare(run, "/gr", "/sqmkit", "u", "", func() error {
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
