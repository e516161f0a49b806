package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// tuned is a tune scenario's own figures (result.Tune).
type tuned struct {
	LineDown    int     `json:"line_download_kbit"` // the profile's line (sync) rates
	LineUp      int     `json:"line_upload_kbit"`
	Rule95Down  int     `json:"rule95_download_kbit"`
	Rule95Up    int     `json:"rule95_upload_kbit"`
	Down        int     `json:"tuned_download_kbit"`
	Up          int     `json:"tuned_upload_kbit"`
	BoostDown   int     `json:"boost_download_kbit,omitempty"` // goodput of a boost tune saw, 0 none
	BoostUp     int     `json:"boost_upload_kbit,omitempty"`
	TestSeconds float64 `json:"test_seconds"` // tune's own test time
	WallSeconds float64 `json:"wall_seconds"`
	Why         string  `json:"why"`
}

// tuneScenario starts a sqmkit backend at the lab's usual 95 % rates, runs
// `sqmkit tune --write` in the router namespace against `sqmkit serve` in
// the server namespace (the router's own traffic crosses its shaper both
// ways, as on a real router), restarts at the rates it wrote, and grades
// them with the full test from the client like any other scenario.
func (g *guest) tuneScenario(t *topo, name string, r *result) error {
	b, err := parseBackend(name)
	if err != nil {
		return err
	}
	if _, ok := b.(sqmkitBackend); !ok {
		return fmt.Errorf("tune runs on sqmkit's own backends (%v), not %s", sqmkitBackends, name)
	}
	sc, err := g.prepare(t, b, r)
	if err != nil {
		return err
	}
	sh := &shell{log: t.sh.log, env: sc.env}
	sq := routerSqmkit(sc.root)
	if out, err := sh.run(nsRouter, sq, "start", "--root", sc.root); err != nil {
		return fmt.Errorf("start: %w: %s", err, lastLine(out))
	}
	js := filepath.Join(r.Dir, "tune.json")
	t0 := time.Now()
	out, err := sh.run(nsRouter, sq, "tune", "--root", sc.root, "--write", "--json", js, serverIP, sc.dev)
	wall := time.Since(t0)
	os.WriteFile(filepath.Join(r.Dir, "tune.log"), []byte(out), 0o644)
	if err != nil {
		sh.run(nsRouter, sq, "stop", "--root", sc.root)
		return fmt.Errorf("sqmkit tune: %w: %s", err, lastLine(out))
	}
	var o tune.Outcome
	bs, err := os.ReadFile(js)
	if err == nil {
		err = json.Unmarshal(bs, &o)
	}
	if err != nil || o.Report == nil {
		return fmt.Errorf("%s: %v", js, err)
	}
	d, u := o.Report.Download, o.Report.Upload
	r.Tune = &tuned{LineDown: t.p.Down, LineUp: t.p.Up, Rule95Down: t.p.Down * 95 / 100, Rule95Up: t.p.Up * 95 / 100,
		Down: d.RateKbit, Up: u.RateKbit, BoostDown: d.Line.BoostKbit, BoostUp: u.Line.BoostKbit,
		TestSeconds: o.Spent.Seconds(), WallSeconds: wall.Seconds(), Why: d.Why + " / " + u.Why}
	r.DownKbit, r.UpKbit = d.RateKbit, u.RateKbit
	// a fresh start from the written config, as after a reboot
	for _, verb := range []string{"stop", "start"} {
		if out, err := sh.run(nsRouter, sq, verb, "--root", sc.root); err != nil {
			return fmt.Errorf("%s at the tuned rates: %w: %s", verb, err, lastLine(out))
		}
	}
	gerr := g.grade(t, r)
	sh.run(nsRouter, sq, "stop", "--root", sc.root)
	if gerr != nil {
		return gerr
	}
	r.Checks = accept.Shaped(*r.Test, r.DownKbit)
	r.Checks = append(r.Checks, accept.Check{Name: "tune test time s", Got: o.Spent.Seconds(), Want: "<= 180", OK: o.Spent <= 3*time.Minute})
	r.Status = status(r.Checks)
	g.say("tune: %s/%s: download %d (%.0f%% of line) upload %d (%.0f%%) grade %s test time %.0f s",
		t.p.Name, r.Backend, d.RateKbit, 100*float64(d.RateKbit)/float64(t.p.Down), u.RateKbit, 100*float64(u.RateKbit)/float64(t.p.Up),
		r.Test.Grade, o.Spent.Seconds())
	return nil
}
