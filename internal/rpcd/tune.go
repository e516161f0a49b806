package rpcd

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
)

// limits are the tune budget's bounds in seconds, the page's and the
// command's alike: at least what tune itself accepts with its default
// phases (tune.Live.MinBudget), tune's own default, an hour at most.
type limits struct {
	Min     int `json:"budget_min_s"`
	Max     int `json:"budget_max_s"`
	Default int `json:"budget_default_s"`
}

func budgetLimits() limits {
	return limits{Min: int(tune.DefaultLive().MinBudget().Seconds()), Max: 3600, Default: int(tune.DefaultBudget.Seconds())}
}

// tokenEnv passes the server's token to a job in its environment.
func tokenEnv(token string) []string {
	if token == "" {
		return nil
	}
	return []string{"SQMKIT_TOKEN=" + token}
}

// tuneStart runs `sqmkit tune` (without --write) in the background.
func (e *Env) tuneStart(args map[string]any) (any, error) {
	server, err := serverArg(args)
	if err != nil {
		return nil, err
	}
	target, err := str(args, "target")
	if err != nil {
		return nil, err
	}
	if target == "" {
		target = "A+"
	}
	if _, ok := search.Targets[target]; !ok {
		return nil, fmt.Errorf("target %q: want A+ or A", target)
	}
	budget, err := num(args, "budget")
	lim := budgetLimits()
	switch {
	case err != nil:
		return nil, err
	case budget == 0:
		budget = lim.Default
	case budget < lim.Min || budget > lim.Max:
		return nil, fmt.Errorf("budget %d s: want %d to %d seconds of test time (the line measurements, %d search steps and the confirming test take %d s)", budget, lim.Min, lim.Max, search.MinSteps, lim.Min)
	}
	t, err := e.target(args)
	if err != nil {
		return nil, err
	}
	token, err := str(args, "token")
	if err != nil {
		return nil, err
	}
	j := e.job("tune")
	out := filepath.Join(j.dir, "out.json")
	cmd := []string{"tune", "--root", e.Root, "--json", out, "--target", target, "--budget", strconv.Itoa(budget) + "s"}
	if e.File != "" {
		cmd = append(cmd, "--config", e.File)
	}
	// server and section after --: never read as flags; an empty --server
	// is the queue's default server (bbproto.DefaultServer)
	if server == "" {
		cmd = append(cmd, "--server=", "--", t.Queue.Section)
	} else {
		cmd = append(cmd, "--", server, t.Queue.Section)
	}
	m := meta{Started: e.Now().UTC(), Server: server, Section: t.Queue.Section, Target: target, Budget: budget, Out: out}
	if err := j.start(e.Exe, cmd, tokenEnv(token), m); err != nil {
		return nil, err
	}
	return map[string]any{"started": true, "section": t.Queue.Section}, nil
}

// target is the queue a call names (argument section), or the one
// enabled queue.
func (e *Env) target(args map[string]any) (apply.Target, error) {
	section, err := str(args, "section")
	if err != nil {
		return apply.Target{}, err
	}
	ts, _, err := e.queues()
	if err != nil {
		return apply.Target{}, err
	}
	if len(ts) == 0 {
		return apply.Target{}, errors.New("no enabled queue: enable one and set its rates on LuCI's SQM page (Network → SQM QoS) first")
	}
	var names []string
	for _, t := range ts {
		if t.Queue.Section == section || section == "" && len(ts) == 1 {
			return t, nil
		}
		names = append(names, t.Queue.Section)
	}
	if section == "" {
		return apply.Target{}, fmt.Errorf("section: %d queues are enabled (%v); name one", len(ts), names)
	}
	return apply.Target{}, fmt.Errorf("section %q: not an enabled queue (enabled: %v)", section, names)
}

// tuneOutcome is a finished tune as the page shows it.
type tuneOutcome struct {
	Found       config.Rates `json:"found"`   // kbit/s the search chose
	Current     config.Rates `json:"current"` // configured now
	Line        config.Rates `json:"line"`    // the measured line rates
	Why         [2]string    `json:"why"`     // download's and upload's reasons
	Confirm     string       `json:"confirm_grade"`
	Unconfirmed bool         `json:"unconfirmed"`
	Spent       float64      `json:"spent_s"`
	Error       string       `json:"error,omitempty"`
	Writable    bool         `json:"writable"` // Write applies: no error, rates that differ
}

// tuneState is the running or last tune: what was asked, its progress
// lines, and its outcome beside the configured rates.
func (e *Env) tuneState(map[string]any) (any, error) {
	if err := e.readable(); err != nil {
		return nil, err
	}
	recovered := e.recover()
	j := e.job("tune")
	var m meta
	j.read("meta.json", &m)
	st := map[string]any{"running": j.running(), "started": m.Started, "server": m.Server, "default_server": e.defaultServer(m.Section), "section": m.Section, "target": m.Target,
		"budget_s": m.Budget, "progress": j.lines(200), "undo": tune.HasUndo(e.Root), "limits": budgetLimits(), "recovered": recovered}
	if o, ok := e.outcome(j, m); ok {
		st["outcome"] = o
	}
	return st, nil
}

// outcome reads a finished tune's JSON. A tune that ended without one
// (killed, out of memory) or without rates (an error) is an outcome too,
// with the reason, never rates of 0.
func (e *Env) outcome(j job, m meta) (tuneOutcome, bool) {
	if m.Out == "" || j.running() {
		return tuneOutcome{}, false
	}
	var t tuneOutcome
	if tg, err := e.target(map[string]any{"section": m.Section}); err == nil {
		t.Current = config.Rates{Download: tg.Queue.Download, Upload: tg.Queue.Upload}
	}
	var o tune.Outcome
	switch err := readJSON(m.Out, &o); {
	case err != nil:
		t.Error = "the tune ended without a result: it was stopped or died before it finished (its last lines are above)"
		return t, true
	case o.Search == nil && o.Error == "":
		t.Error = "the tune ended without rates"
	}
	t.Error = cmp.Or(o.Error, t.Error)
	t.Unconfirmed, t.Spent = o.Unconfirmed, time.Duration(o.Spent).Seconds()
	if o.Confirm != nil {
		t.Confirm = o.Confirm.Grades.DSLReports
	}
	if r := o.Search; r != nil && t.Error == "" {
		t.Found = config.Rates{Download: r.Download.RateKbit, Upload: r.Upload.RateKbit}
		t.Line = config.Rates{Download: r.Download.Line.RateKbit, Upload: r.Upload.Line.RateKbit}
		t.Why = [2]string{r.Download.Why, r.Upload.Why}
	}
	t.Writable = t.Error == "" && !o.Written && t.Found != t.Current && t.Found.Check() == nil
	return t, true
}

// tuneWrite writes the last tune's rates: what --write would have done.
func (e *Env) tuneWrite(map[string]any) (any, error) {
	j := e.job("tune")
	if j.running() {
		return nil, errors.New("the tune is still running; write its rates when it ends")
	}
	var m meta
	j.read("meta.json", &m)
	o, ok := e.outcome(j, m)
	switch {
	case !ok:
		return nil, errors.New("no finished tune to write; start one")
	case o.Error != "":
		return nil, fmt.Errorf("the tune ended without rates to keep: %s", o.Error)
	case !o.Writable:
		return nil, fmt.Errorf("section %s runs at %d/%d kbit/s already", m.Section, o.Current.Download, o.Current.Upload)
	}
	t, err := e.target(map[string]any{"section": m.Section})
	if err != nil {
		return nil, err
	}
	old, err := tune.Keep(e.Root, e.File, t, o.Found, e.Opts)
	if err != nil {
		return nil, err
	}
	// what the router keeps across reboots: the rates written, the line
	// they were found on
	history.Update(e.Root, e.Now(), func(h *history.History) {
		h.Queue(m.Section).Tuned = &history.Tuned{At: e.Now().UTC(), Down: o.Found.Download, Up: o.Found.Upload,
			LineDown: o.Line.Download, LineUp: o.Line.Upload, OldDown: old.Download, OldUp: old.Upload}
	})
	return map[string]any{"written": o.Found, "old": old, "section": m.Section}, nil
}

// tuneUndo restores the rates the last write replaced (--undo).
func (e *Env) tuneUndo(args map[string]any) (any, error) {
	if e.job("tune").running() {
		return nil, errors.New("a tune is running; undo when it ends")
	}
	t, err := e.target(args)
	if err != nil {
		return nil, err
	}
	old, err := tune.Undo(e.Root, e.File, t, e.Opts)
	if err != nil {
		return nil, err
	}
	return map[string]any{"restored": old, "section": t.Queue.Section}, nil
}
