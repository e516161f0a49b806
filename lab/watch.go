package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/watch"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/linkemu"
)

// The watch in the lab (mode "watch"): cake at 95 % of the line, the
// watch on the router with its hours compressed into minutes, a download
// for 45 s of every minute from the client (loadMinutes), and the modem's
// line as each variant has it:
//
//   - "steady": the line stays put for watchSteady; the watch must say
//     nothing (a full shaper with flat delay is a shaper at work);
//   - "falls": after two minutes the line falls 30 %; the watch must name
//     the bloat on the download within watchNamed;
//   - "rises": the line rises 50 %; the scheduled check (quiet hours all
//     day, one quiet minute first) must name a faster line within
//     watchNamed; the router then restarts its watch with its /var/run
//     state gone, as after a reboot, and the finding must be there at once,
//     read back from the router's record (nothing judged yet could have
//     made it).
var watchVariants = []string{"steady", "falls", "rises"}

// The watch's compressed hours: a window of six minutes, three loaded
// minutes of evidence, a probe a second; how long a variant runs.
const (
	watchSection    = "wan" // routerUCI's queue
	watchWindow     = 6 * time.Minute
	watchSteady     = 8 * time.Minute
	watchBefore     = 2 * time.Minute
	watchNamed      = 6 * time.Minute
	watchMinMinutes = 3
)

func (g *guest) watchScenario(t *topo, variant string, r *result) error {
	if !slices.Contains(watchVariants, variant) {
		return fmt.Errorf("watch variant %q: want one of %s", variant, strings.Join(watchVariants, ", "))
	}
	down, up := t.p.Down*95/100, t.p.Up*95/100
	sc, err := g.prepareAt(t, sqmkitBackend("cake"), r, down, up)
	if err != nil {
		return err
	}
	// each variant starts with a router that has learnt nothing: the
	// variants share the backend's root
	os.Remove(history.Path(sc.root))
	os.RemoveAll(filepath.Dir(watch.StatusPath(sc.root, watchSection)))
	// the scheduled check's test goes to the lab's sqmkit serve
	f, err := os.OpenFile(filepath.Join(sc.root, "etc/config/sqm"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "\toption test_server '%s'\n", serverIP)
	f.Close()
	sh := &shell{log: t.sh.log, env: sc.env}
	if _, err := sh.run(nsRouter, routerSqmkit(sc.root), "start", "--root", sc.root); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer sh.run(nsRouter, routerSqmkit(sc.root), "stop", "--root", sc.root)
	startWatch := func(log string) (*proc, error) {
		args := []string{routerSqmkit(sc.root), "watch", "--root", sc.root, "--probe-interval", "1s", "--window", watchWindow.String(),
			"--min-minutes", strconv.Itoa(watchMinMinutes), "--reflectors", serverIP}
		if variant == "rises" {
			args = append(args, "--check", "daily", "--quiet-hours", "0:24", "--quiet-for", "1m")
		}
		return sh.daemon(nsRouter, filepath.Join(r.Dir, log), append(args, watchSection)...)
	}
	w, err := startWatch("watch.log")
	if err != nil {
		return err
	}
	defer func() { w.Process.Signal(syscall.SIGTERM); <-w.done }()
	readStatus := func() watch.Status {
		var st watch.Status
		b, _ := os.ReadFile(watch.StatusPath(sc.root, watchSection))
		json.Unmarshal(b, &st)
		return st
	}
	load := make(chan struct{})
	defer close(load)
	if variant != "rises" {
		go t.loadMinutes(load)
	}
	begin := time.Now()
	var changed time.Time
	line := func(kbit int) error {
		return t.sh.must(nsModem, append([]string{"tc"}, linkemu.Change(t.p, "m0", config.Download, kbit)...))
	}
	defer line(t.p.Down) // the next variant finds the profile's line
	switch variant {
	case "steady":
		time.Sleep(watchSteady)
	case "falls":
		time.Sleep(watchBefore)
		changed = time.Now()
		if err := line(t.p.Down * 70 / 100); err != nil {
			return err
		}
	case "rises":
		changed = time.Now()
		if err := line(t.p.Down * 150 / 100); err != nil {
			return err
		}
	}
	want := map[string]string{"falls": watch.BloatBack + "-download", "rises": watch.LineFaster + "-download"}[variant]
	var named time.Duration
	if want != "" {
		waitFor(watchNamed, func() bool { return hasFinding(readStatus().Findings, want) })
		if hasFinding(readStatus().Findings, want) {
			named = time.Since(changed)
		}
	}
	st := readStatus()
	os.WriteFile(filepath.Join(r.Dir, "watch-status.json"), mustJSON(st), 0o644)
	g.say("%s/watch-%s: %d minutes watched, findings %s", t.p.Name, variant, len(st.Minutes), findingIDs(st.Findings))
	r.Checks = watchChecks(variant, st, want, named, time.Since(begin))
	if variant != "rises" { // a scheduled check's test is a test's cost, not the watch's
		r.Checks = append(r.Checks, watchCPU(w.Process.Pid, time.Since(begin)))
	}
	if variant == "rises" && named > 0 {
		r.Checks = append(r.Checks, g.watchReboot(sc.root, w, startWatch, want))
	}
	r.Status = status(r.Checks)
	return nil
}

// watchChecks: steady says nothing for as long as the others run; falls
// and rises name their change within watchNamed.
func watchChecks(variant string, st watch.Status, want string, named, ran time.Duration) []accept.Check {
	if variant == "steady" {
		// silence counts only where the watch had its evidence: the
		// window's loaded download minutes, as many as it judges on
		loaded := 0
		for _, m := range st.Minutes {
			if m.Load[0] >= watch.DefaultParams.Busy && m.Load[1] < watch.DefaultParams.Quiet {
				loaded++
			}
		}
		return []accept.Check{{Name: fmt.Sprintf("findings on a steady line over %.0f minutes (%s)", ran.Minutes(), findingIDs(st.Findings)),
			Got: float64(len(st.Findings)), Want: "0", OK: len(st.Findings) == 0},
			{Name: "loaded download minutes in the watch's window", Got: float64(loaded), Want: fmt.Sprintf(">= %d", watchMinMinutes), OK: loaded >= watchMinMinutes}}
	}
	return []accept.Check{{Name: fmt.Sprintf("minutes from the line's change to the watch's %s", want), Got: named.Minutes(),
		Want: fmt.Sprintf("> 0, <= %.0f", watchNamed.Minutes()), OK: named > 0 && named <= watchNamed}}
}

// watchReboot restarts the watch as after a reboot (its /var/run state
// emptied) and wants its finding back at once, from the router's record.
func (g *guest) watchReboot(root string, w *proc, start func(string) (*proc, error), want string) accept.Check {
	w.Process.Signal(syscall.SIGTERM)
	<-w.done
	h, _ := history.Load(root)
	// the watch's RAM state goes, as at a reboot; the shaper's own record
	// stays, so the scenario's stop still finds what it applied
	os.RemoveAll(filepath.Dir(watch.StatusPath(root, watchSection)))
	again, err := start("watch-after-reboot.log")
	c := accept.Check{Name: "the finding read back after a reboot, before anything is judged again", Want: "1"}
	if err != nil {
		c.Name += ": " + err.Error()
		return c
	}
	defer func() { again.Process.Signal(syscall.SIGTERM); <-again.done }()
	var st watch.Status
	waitFor(20*time.Second, func() bool {
		b, _ := os.ReadFile(watch.StatusPath(root, watchSection))
		return json.Unmarshal(b, &st) == nil && hasFinding(st.Findings, want)
	})
	kept := h.Queues[watchSection] != nil && hasFinding(h.Queues[watchSection].Findings, want)
	c.OK = hasFinding(st.Findings, want) && len(st.Minutes) == 0 && kept
	c.Got = map[bool]float64{true: 1}[c.OK]
	return c
}

func hasFinding(fs []history.Finding, id string) bool {
	return slices.ContainsFunc(fs, func(f history.Finding) bool { return f.ID == id })
}

func findingIDs(fs []history.Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.ID)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

func mustJSON(v any) []byte {
	b, _ := json.MarshalIndent(v, "", " ")
	return b
}

// loadMinutes loads the download from the client (iperf3 from the
// server, four streams) for 45 s of every minute after 15 s idle, until
// stop closes: most of a minute's probes wait under load, so its median
// is a loaded one, and the idle spells keep the baseline.
func (t *topo) loadMinutes(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(15 * time.Second):
		}
		c := t.sh.cmd(nsClient, "iperf3", "-c", serverIP, "-R", "-P", "4", "-t", "45")
		c.Start()
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-stop:
			c.Process.Kill()
			<-done
			return
		case <-done:
		}
	}
}

// watchCPU is the watch's CPU over ran, as a share of one core: its probe
// (here one a second, twice the default) and counter reads must cost the
// router next to nothing.
func watchCPU(pid int, ran time.Duration) accept.Check {
	c := accept.Check{Name: "the watch's CPU, % of one core (a probe a second)", Want: "< 1"}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		c.Name += ": " + err.Error()
		return c
	}
	if _, t, ok := statCPU(string(b)); ok && ran > 0 {
		c.Got = 100 * (t.User + t.Sys) / ran.Seconds()
		c.OK = c.Got < 1
	}
	return c
}
