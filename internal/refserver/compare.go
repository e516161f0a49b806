package refserver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/sqmkit/sqmkit/internal/rpm"
)

// Run runs one command of a comparison where the client runs (argv[0] a
// path there) and returns its combined output.
type Run func(argv ...string) (string, error)

// Comparison is both clients' RPM against one server on one path, per
// direction (download, upload), and each command's output by name, in
// the order run.
type Comparison struct {
	Ours    [2]Stage
	Theirs  [2]Theirs
	Outputs []Output
}

// Output is one command's output in a comparison.
type Output struct{ Name, Text string }

// Compare runs goresponsiveness at its maximum of connections, then `sqmkit
// test --rpm` held to the connections it ended with and to its probe rate
// (ProbeRounds), then goresponsiveness again for a direction where
// sqmkit's own stop ended lower: the reference nginx buffers a fixed
// amount per stream, so the loaded GET grows with the connections and only
// equal counts compare (TestCompareHoldsSqmkitToTheirs).
// before, if not nil, runs before each command (the lab lets the path
// settle). logs, when not "", is a directory (on the client's side, with no
// dot in its path) for goresponsiveness's probe logs, from which each
// direction's two halves are read (Halves).
func Compare(run Run, goresp, sqmkit, url, logs string, before func() error) (Comparison, error) {
	var c Comparison
	step := func(name string, argv ...string) (string, error) {
		if before != nil {
			if err := before(); err != nil {
				return "", err
			}
		}
		out, err := run(argv...)
		c.Outputs = append(c.Outputs, Output{name, out})
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		return out, nil
	}
	// goresponsiveness's no-figure (no probe in its last window, or a load
	// generator that gave up) is often its own flake: it runs once more
	// when a direction it is run for got none, and each direction keeps
	// the first figure measured (TestCompareRunsAgain)
	theirs := func(name string, conns int, want ...int) ([2]Theirs, error) {
		var th [2]Theirs
		for again := range 2 {
			if again > 0 {
				name += "-again"
			}
			base := ""
			if logs != "" {
				base = filepath.Join(logs, name)
			}
			out, err := step(name, append([]string{goresp}, GoresponsivenessArgs(url, conns, base)...)...)
			if err != nil {
				return th, err
			}
			var got [2]Theirs
			if got[0], got[1], err = Goresponsiveness([]byte(out)); err != nil {
				return th, err
			}
			if base != "" {
				Halves(probeLog(base, "self"), probeLog(base, "foreign"), &got)
			}
			for i := range th {
				if again == 0 || !th[i].Measured() {
					th[i] = got[i]
				}
			}
			if !slices.ContainsFunc(want, func(i int) bool { return !th[i].Measured() }) {
				break
			}
		}
		return th, nil
	}
	var err error
	if c.Theirs, err = theirs("goresponsiveness", 0, 0, 1); err != nil {
		return c, err
	}
	held := map[int][]Stage{}
	for i, th := range c.Theirs {
		// a load generator that gave up (0) ends with no count to hold to
		n := th.Conns
		if n < 1 || n > rpm.MaxConns {
			n = rpm.MaxConns
		}
		if _, ok := held[n]; !ok {
			out, err := step("sqmkit-rpm-"+strconv.Itoa(n), sqmkit, "test", "--rpm", url, "--rpm-insecure", "--quiet", "--rpm-rate", strconv.Itoa(ProbeRounds), "--rpm-conns", strconv.Itoa(n))
			if err != nil {
				return c, err
			}
			if held[n], err = Stages([]byte(out)); err != nil {
				return c, err
			}
		}
		c.Ours[i] = held[n][i]
	}
	for i, st := range c.Ours {
		if st.Conns < 1 || st.Conns >= c.Theirs[i].Conns {
			continue
		}
		th, err := theirs(fmt.Sprintf("goresponsiveness-%s-%d", st.Direction, st.Conns), st.Conns, i)
		if err != nil {
			return c, err
		}
		c.Theirs[i] = th[i]
	}
	return c, nil
}

// probeLog is goresponsiveness's probe log of kind ("self", "foreign")
// under base: it names them base-KIND-<its run's time>.
func probeLog(base, kind string) []byte {
	names, _ := filepath.Glob(base + "-" + kind + "-*")
	if len(names) == 0 {
		return nil
	}
	b, _ := os.ReadFile(names[len(names)-1])
	return b
}
