package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
	"github.com/sqmkit/sqmkit/lab/internal/trace"
)

// ctlTune runs no controller: `sqmkit tune` searches the shaper's rates
// while the trace replays. On a recorded link it must say the line moves
// and give autorate's bounds instead of writing one rate.
const ctlTune = "tune"

// tunedTrace is a tune cell's verdict (result.TraceTune).
type tunedTrace struct {
	Trace   string `json:"trace"`
	Kind    string `json:"kind"`
	Moving  bool   `json:"moving"` // tune said a line moves
	Written bool   `json:"written"`
	// The bounds tune gave autorate (kbit/s; download, upload; 0 none),
	// beside the ones the lab's rule gives every controller.
	Floor      [2]int       `json:"floor_kbit"`
	Ceiling    [2]int       `json:"ceiling_kbit"`
	LabFloor   [2]int       `json:"lab_floor_kbit"`
	LabCeiling [2]int       `json:"lab_ceiling_kbit"`
	Seconds    float64      `json:"seconds"`
	Error      string       `json:"error,omitempty"`
	Noise      *noise.Stats `json:"host_noise,omitempty"`
}

var tuneBoundRE = regexp.MustCompile(`autorate_(min|max)_(download|upload) '(\d+)'`)

// tuneTrace runs `sqmkit tune` (no --write) on the shaper startCtl set up
// while the player replays the trace, and judges what it said.
func (g *guest) tuneTrace(t *topo, tr *trace.Trace, profilePath, tracePath string, pr planRun, r *result, c *ctlRun) error {
	// tune's budget inside the replay: past its end the link would freeze
	// at its last slot, a steady one
	budget := min(tune.DefaultBudget, tr.Duration()-20*time.Second)
	if budget < time.Minute {
		return fmt.Errorf("tune on %s: %v of trace leaves tune under a minute: replay at least 80 s", tr.Name, tr.Duration())
	}
	if err := g.settle("tune on " + tr.Name); err != nil {
		return err
	}
	player, err := t.sh.daemon(nsModem, filepath.Join(r.Dir, "replay.log"), filepath.Join(filepath.Dir(g.tools.sqmkit), "sqmkit-lab"), "replay",
		profilePath, tracePath, fmt.Sprint(pr.Seconds), fmt.Sprint(pr.SlotMs))
	if err != nil {
		return err
	}
	defer player.stop()
	start := time.Now()
	js := filepath.Join(r.Dir, "tune-trace.json")
	out, terr := c.sh.run(nsRouter, routerSqmkit(c.sc.root), "tune", "--root", c.sc.root, "--budget", budget.String(), "--json", js, "-4", serverIP, c.sc.dev)
	end := time.Now()
	os.WriteFile(filepath.Join(r.Dir, "tune-trace.log"), []byte(out), 0o644)
	select {
	case <-player.done:
		// the link froze at its last slot while tune still measured
		return fmt.Errorf("tune on %s outlasted the replay (%v): replay more of it (--seconds)", tr.Name, end.Sub(start).Round(time.Second))
	default:
	}
	var o tune.Outcome
	b, err := os.ReadFile(js)
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err != nil {
		return fmt.Errorf("tune on %s: %v (tune: %v)", tr.Name, err, terr)
	}
	x := tunedTrace{Trace: tr.Name, Kind: tr.Kind, Written: o.Written, Error: o.Error, Seconds: end.Sub(start).Seconds()}
	x.Moving = strings.Contains(o.Error, "line moves")
	x.Floor, x.Ceiling = tuneBounds(o.Error)
	x.LabFloor, _, x.LabCeiling = traceBounds(tr)
	if g.noise != nil {
		st, err := g.noise.Window(start, end)
		if err != nil {
			return fmt.Errorf("noise gauge: %w", err)
		}
		x.Noise = &st
	}
	r.TraceTune = &x
	r.Checks = tuneTraceChecks(x, tr.Recorded())
	r.Status = "pass"
	for _, ck := range r.Checks {
		if !ck.OK {
			r.Status = "fail"
		}
	}
	g.say("trace: %s", traceTuneLine(&x))
	return nil
}

// traceTuneLine is a tune cell's verdict and the bounds beside the lab's.
func traceTuneLine(x *tunedTrace) string {
	verdict := "one rate"
	if x.Moving {
		verdict = "the line moves"
	}
	return fmt.Sprintf("%s/tune: %s (%.0f s), written %v; autorate's bounds down %d..%d up %d..%d kbit/s (the lab's rule: %d..%d, %d..%d)",
		x.Trace, verdict, x.Seconds, x.Written, x.Floor[0], x.Ceiling[0], x.Floor[1], x.Ceiling[1], x.LabFloor[0], x.LabCeiling[0], x.LabFloor[1], x.LabCeiling[1])
}

// tuneBounds reads the autorate bounds a moving verdict gives (its UCI
// options), 0 where it gives none.
func tuneBounds(msg string) (floor, ceiling [2]int) {
	for _, m := range tuneBoundRE.FindAllStringSubmatch(msg, -1) {
		var v int
		fmt.Sscan(m[3], &v)
		d := 0
		if m[2] == "upload" {
			d = 1
		}
		if m[1] == "min" {
			floor[d] = v
		} else {
			ceiling[d] = v
		}
	}
	return floor, ceiling
}

// tuneTraceChecks: on a recorded link tune says it moves, writes nothing,
// and bounds at least one direction; a generated steady one is not judged
// here (the tune scenarios are).
func tuneTraceChecks(x tunedTrace, recorded bool) []accept.Check {
	if !recorded {
		return nil
	}
	bounded := x.Floor[0] > 0 && x.Ceiling[0] > x.Floor[0] || x.Floor[1] > 0 && x.Ceiling[1] > x.Floor[1]
	return []accept.Check{
		{Name: "tune says the line moves", Got: one(x.Moving), Want: "1", OK: x.Moving},
		{Name: "tune wrote no rate", Got: one(x.Written), Want: "0", OK: !x.Written},
		{Name: "tune gave autorate's bounds", Got: one(bounded), Want: "1", OK: bounded},
	}
}
