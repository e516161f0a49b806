package tune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/statefile"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/search"
)

// Session is one `sqmkit tune`: a search on a running queue, a confirming
// full test, and then either the rates written to the config or the
// shaper put back where it was.
type Session struct {
	Live   *Live
	Target search.Target
	Budget time.Duration // total test time; 0: no limit
	Write  bool
	Root   string // for the config and the undo file
	File   string // the SQM config; "" is ROOT/etc/config/sqm
	Log    func(string)

	confirmTest func(context.Context, bbclient.Config) (*bbresult.Result, error)
}

// Outcome is what a session did.
type Outcome struct {
	Search  *search.Result
	Confirm *bbresult.Result // the full test at the chosen rates
	// Again is the first confirming test's missed phase measured once
	// more (measureAgain), whose mean with the confirm's was judged; nil
	// when none was.
	Again   *bbresult.Result
	Written bool
	Old     config.Rates // the configured rates before --write
	// ConfirmedAt are the rates the (last) confirming test ran at: over
	// the final ones when Unconfirmed.
	ConfirmedAt config.Rates
	Spent       time.Duration
	// Unconfirmed: the confirming test missed by a little, the rates were
	// lowered one step, and the budget had no room to confirm them again.
	Unconfirmed bool
	// Error is what ended a session that failed (Run's error), for readers
	// of its JSON (LuCI's tune page offers no Write then).
	Error string `json:",omitempty"`
}

// maxUndo caps the undo record: a few hundred bytes when sqmkit wrote it.
const maxUndo = 64 << 10

// undoPath keeps the rates a --write replaced, for --undo.
func undoPath(root string) string { return filepath.Join(root, "etc", "sqmkit", "tune-undo.json") }

// HasUndo says whether a --write left rates for --undo to restore.
func HasUndo(root string) bool {
	_, err := os.Stat(undoPath(root))
	return err == nil
}

type undo struct {
	Section string       `json:"section"`
	Old     config.Rates `json:"old"`
	New     config.Rates `json:"new"`
	At      time.Time    `json:"at"`
}

// Run tunes. Whatever happens (an interrupt, a lost server, a failed
// step, a confirm that misses), the shaper ends at the rates it had
// unless the new ones were written: the restore runs on its own context,
// so a cancelled ctx still restores.
func (s *Session) Run(ctx context.Context) (o *Outcome, err error) {
	l := s.Live
	restore, err := s.begin()
	if err != nil {
		return nil, err
	}
	o = &Outcome{}
	defer func() {
		o.Spent = l.Spent
		err = restore(o.Written, err)
	}()
	l.Budget = s.Budget
	cfg, err := s.config()
	if err != nil {
		return o, err
	}
	if o.Search, err = search.Search(ctx, l, cfg); err != nil {
		return o, err
	}
	if err := s.confirmAll(ctx, o); err != nil || !s.Write {
		return o, err
	}
	return o, s.write(o)
}

// config is the search's: the queue's framing (plan's rules), and with a
// budget the steps left once the line measurements, one confirming test
// and a phase to measure a missed one of its phases again come off it.
func (s *Session) config() (search.Config, error) {
	l := s.Live
	q, f := l.Target.Queue, l.Target.Facts
	cfg := search.Config{Target: s.Target, OpenDown: open(q.Download), OpenUp: open(q.Upload),
		RatePerGoodput: plan.RatePerGoodput(q, f), AckUncounted: plan.AckUncounted(q, f),
		ProbeKbit: l.probeKbit(), Progress: s.Log}
	if s.Budget <= 0 {
		return cfg, nil
	}
	fixed := l.fixedCost()
	if cfg.MaxSteps = int((s.Budget - fixed) / l.phase(l.Step)); cfg.MaxSteps < search.MinSteps {
		return cfg, fmt.Errorf("a test-time budget of %v holds the line measurements and a confirming test with a phase to spare (%v) and %d search steps of %v, want %d; give a --budget of at least %v",
			s.Budget, fixed, max(0, cfg.MaxSteps), l.phase(l.Step), search.MinSteps, l.MinBudget())
	}
	return cfg, nil
}

// confirmAll runs the confirming test at the searched rates, and once more
// at the rates search.LowerAfterConfirm lowered after a miss by a little
// (or a bidirectional one on a saturated core).
func (s *Session) confirmAll(ctx context.Context, o *Outcome) error {
	l, r := s.Live, o.Search
	for try := 0; ; try++ {
		s.log("confirming %d/%d kbit/s with a full test", r.Download.RateKbit, r.Upload.RateKbit)
		o.ConfirmedAt = config.Rates{Download: r.Download.RateKbit, Upload: r.Upload.RateKbit}
		var err error
		o.Confirm, err = s.confirm(ctx, l.confirming(r.Length(search.Bidir)))
		l.Spent += l.confirmCost(r.Length(search.Bidir))
		if err != nil {
			return fmt.Errorf("confirming test: %w", err)
		}
		// a test that did not test confirms nothing (TestSessionConfirmIncomplete)
		if o.Confirm.Incomplete != "" {
			return fmt.Errorf("the confirming test has no grade (%s); nothing written", o.Confirm.Incomplete)
		}
		r.Confirmed(o.Confirm)
		k, p, missed := r.ConfirmMiss(o.Confirm)
		if !missed {
			return nil
		}
		t := r.TargetOf(k)
		if try == 0 {
			var again *bbresult.Result
			if p, again, err = s.measureAgain(ctx, k, r.Length(k), t, p); err != nil {
				return fmt.Errorf("confirming test: %w", err)
			}
			if o.Again = again; t.Meets(p.AddedMedian, p.AddedP95) {
				return nil
			}
		}
		confirmAgain := s.Budget == 0 || l.Spent+l.confirmCost(r.Length(search.Bidir)) <= s.Budget
		if !r.LowerAfterConfirm(k, p, confirmAgain) {
			return errors.New(search.Missed(t, k, p, o.Again != nil))
		}
		if err := l.SetRates(ctx, r.Download.RateKbit, r.Upload.RateKbit); err != nil {
			return err
		}
		if !confirmAgain {
			o.Unconfirmed = true
			s.log("the confirming test's %s phase missed %s (+%.1f/+%.1f ms): lowered to %d/%d kbit/s, not confirmed again: the test-time budget has no room (%v used of %v)",
				k, t.Name, p.AddedMedian, p.AddedP95, r.Download.RateKbit, r.Upload.RateKbit, l.Spent.Round(time.Second), s.Budget)
			return nil
		}
		s.log("the confirming test's %s phase missed %s (+%.1f/+%.1f ms): lowered to %d/%d kbit/s, confirming once more", k, t.Name, p.AddedMedian, p.AddedP95, r.Download.RateKbit, r.Upload.RateKbit)
	}
}

// write puts the confirmed rates in the config and keeps the ones they
// replaced for --undo.
func (s *Session) write(o *Outcome) error {
	r, q := o.Search, s.Live.Target.Queue
	now := config.Rates{Download: r.Download.RateKbit, Upload: r.Upload.RateKbit}
	old, undoErr, err := writeRates(s.Root, s.File, q.Section, now)
	if err != nil {
		return err
	}
	o.Old, o.Written = old, true
	ratestate.Clear(s.Live.Opts.RateDir, q.Interface) // the config says it now
	if undoErr != nil {
		s.log("written, but the undo record was not (%v); the old rates were %d/%d", undoErr, old.Download, old.Upload)
	}
	return nil
}

// writeRates stores rates in section's options and the rates they
// replaced in the undo record; undoErr says the record could not be kept.
func writeRates(root, file, section string, rates config.Rates) (old config.Rates, undoErr, err error) {
	if old, err = config.WriteRates(root, file, section, rates); err != nil {
		return old, nil, err
	}
	b, _ := json.MarshalIndent(undo{Section: section, Old: old, New: rates, At: time.Now().UTC()}, "", "  ")
	undoErr = statefile.Write(undoPath(root), b, 0o644)
	return old, undoErr, nil
}

// Keep writes the rates a finished tune found into the config, keeping the
// replaced ones for Undo, and moves the running shaper to them: what
// --write does at the end of a session, for a tune that ran without it
// (LuCI's Write button).
func Keep(root, file string, t apply.Target, rates config.Rates, opts apply.Options) (config.Rates, error) {
	if err := rates.Check(); err != nil {
		return config.Rates{}, err
	}
	old, undoErr, err := writeRates(root, file, t.Queue.Section, rates)
	if err != nil {
		return old, err
	}
	if r := apply.Rate(t, rates, "sqmkit tune", opts); r.State == apply.Failed {
		return old, fmt.Errorf("config written; the running shaper kept its rates (%v): run sqmkit start", r.Err)
	}
	ratestate.Clear(opts.RateDir, t.Queue.Interface)
	if undoErr != nil {
		return old, fmt.Errorf("written, but the undo record was not: %w", undoErr)
	}
	return old, nil
}

// begin refuses a queue that is not running as planned, and returns what
// puts the shaper back at the rates it had: the caller defers it, with
// keep true once new rates are written. It runs on its own context, so a
// cancelled one still restores.
func (s *Session) begin() (restore func(keep bool, err error) error, err error) {
	l := s.Live
	q := l.Target.Queue
	if q.Download == 0 || q.Upload == 0 {
		return nil, &config.FieldError{Section: q.Section, Option: "download", Value: fmt.Sprintf("%d/%d", q.Download, q.Upload),
			Why: "tune searches both directions and needs both shaped", Fix: "set download and upload (any rate near the line's) and run sqmkit start"}
	}
	// a tune that died before leaves its trial rates in force: put them
	// back first, then hold the queue (a test, another tune and autorate's
	// changes wait) for the whole search and its restore
	for _, said := range apply.RecoverTrials(s.Root, []config.Queue{q}, l.Opts) {
		s.log("%s", said)
	}
	unlock, err := joblock.HoldQueues(l.Opts.Jobs, []string{q.Interface}, joblock.Holder{Kind: "tune", PID: os.Getpid(), Started: time.Now(), What: q.Section})
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.Section, err)
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	if st := apply.Inspect([]apply.Target{l.Target}, l.Opts)[0]; !st.Matches() {
		why := st.Err
		if why == nil {
			why = errors.New(st.Diffs[0].String())
		}
		return nil, fmt.Errorf("%s is not shaped as planned (%v); run sqmkit start first", q.Interface, why)
	}
	orig := config.Rates{Download: q.Download, Upload: q.Upload}
	// the rates this tune changes are its trial's: never kept, and put
	// back by whoever finds it gone (apply.RecoverTrials)
	l.Opts.Trial = &ratestate.Trial{Kept: orig, PID: os.Getpid(), Started: time.Now().UTC()}
	return func(keep bool, err error) error {
		defer unlock()
		l.Opts.Trial = nil
		if keep {
			return err
		}
		if r := apply.Rate(l.Target, orig, "sqmkit tune", l.Opts); r.State == apply.Failed {
			lost := fmt.Errorf("restoring %d/%d kbit/s failed: %v (run sqmkit start)", orig.Download, orig.Upload, r.Err)
			return errors.Join(err, lost)
		}
		s.log("rates restored to %d/%d kbit/s", orig.Download, orig.Upload)
		// the configured rates run again: nothing to remember
		ratestate.Clear(l.Opts.RateDir, q.Interface)
		return err
	}, nil
}

// Sweep measures the whole rate–latency curve of the running queue (see
// SweepConfig) and leaves the shaper at the rates it had.
func (s *Session) Sweep(ctx context.Context, c search.SweepConfig) (res *search.SweepResult, err error) {
	l := s.Live
	restore, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer func() { err = restore(false, err) }()
	l.Budget = s.Budget
	q := l.Target.Queue
	c.Target, c.Progress = s.Target, s.Log
	c.OpenDown, c.OpenUp, c.RatePerGoodput = open(q.Download), open(q.Upload), plan.RatePerGoodput(q, l.Target.Facts)
	c.ProbeKbit = l.probeKbit()
	if c.Phase > 0 {
		l.Step = c.Phase
	}
	res, err = search.Sweep(ctx, l, c)
	if res != nil {
		res.Phase = l.Step
	}
	return res, err
}

// Undo writes back the rates the last --write replaced and moves the
// running shaper to them (when it runs).
func Undo(root, file string, t apply.Target, opts apply.Options) (config.Rates, error) {
	b, err := statefile.Read(undoPath(root), maxUndo, "tune undo record")
	if errors.Is(err, fs.ErrNotExist) {
		return config.Rates{}, fmt.Errorf("nothing to undo: %w", err)
	}
	if err != nil {
		return config.Rates{}, err
	}
	var u undo
	if err := json.Unmarshal(b, &u); err != nil {
		return config.Rates{}, fmt.Errorf("%s: %w (remove it; sqmkit tune --write makes a new one)", undoPath(root), err)
	}
	// the record is a file anybody with root may have edited: its rates
	// pass the config's checks before they are written back
	if err := u.Old.Check(); err != nil {
		return config.Rates{}, fmt.Errorf("%s: %w (remove it; sqmkit tune --write makes a new one)", undoPath(root), err)
	}
	if u.Section != t.Queue.Section {
		return config.Rates{}, fmt.Errorf("the last tune --write changed section %s, not %s", u.Section, t.Queue.Section)
	}
	if _, err := config.WriteRates(root, file, u.Section, u.Old); err != nil {
		return config.Rates{}, err
	}
	if r := apply.Rate(t, u.Old, "sqmkit tune --undo", opts); r.State == apply.Failed {
		return u.Old, fmt.Errorf("config restored; the running shaper kept its rates (%v): run sqmkit start", r.Err)
	}
	ratestate.Clear(opts.RateDir, t.Queue.Interface)
	return u.Old, os.Remove(undoPath(root))
}

// confirm runs the confirming test (tests put a doctored one in).
func (s *Session) confirm(ctx context.Context, c bbclient.Config) (*bbresult.Result, error) {
	if s.confirmTest != nil {
		return s.confirmTest(ctx, c)
	}
	return s.Live.measured(ctx, c)
}

// measureAgain measures the confirming test's missed phase k (figures p)
// once more at the same rates and returns the mean of the two and the
// second test, when search.MeasureAgain allows and the budget holds it
// (fixedCost keeps a phase's room for it).
func (s *Session) measureAgain(ctx context.Context, k search.Kind, length search.Length, t search.Target, p search.Phase) (search.Phase, *bbresult.Result, error) {
	l := s.Live
	n := l.length(k, length)
	if !search.MeasureAgain(t, p) || s.Budget > 0 && l.Spent+l.phase(n) > s.Budget {
		return p, nil, nil
	}
	res, err := s.confirm(ctx, l.one(k, n))
	l.Spent += l.phase(n)
	if err != nil {
		return p, nil, err
	}
	q, err := search.PhaseOf(res, k)
	if err != nil {
		return p, nil, err
	}
	m := search.MeanPhase(p, q)
	s.log("the confirming test's %s phase missed %s (+%.1f/+%.1f ms); measured again: +%.1f/+%.1f ms, judged on the mean, +%.1f/+%.1f ms",
		k, t.Name, p.AddedMedian, p.AddedP95, q.AddedMedian, q.AddedP95, m.AddedMedian, m.AddedP95)
	return m, res, nil
}

func (s *Session) log(format string, a ...any) {
	if s.Log != nil {
		s.Log(fmt.Sprintf(format, a...))
	}
}

// open is a rate far above any line the configured rate was near: the
// shaper stays in place but never limits while the line is measured.
func open(configured int) int { return min(configured*4, 10_000_000) }

// Check is the watch's scheduled check of the running queue: the line
// measured each way with the shaper open (for Live.Line and LineUp), as a
// search measures it, then test at the rates the queue runs at; the
// shaper ends at its rates, and the queue is held throughout (no autorate,
// tune or other test meanwhile; one running refuses the check).
func (s *Session) Check(ctx context.Context, test bbclient.Config) (down, up search.Line, res *bbresult.Result, err error) {
	l := s.Live
	restore, err := s.begin()
	if err != nil {
		return down, up, nil, err
	}
	defer func() { err = restore(false, err) }()
	q := l.Target.Queue
	c := search.Config{RatePerGoodput: plan.RatePerGoodput(q, l.Target.Facts), ProbeKbit: l.probeKbit(), Progress: s.Log}
	if err = l.SetRates(ctx, open(q.Download), open(q.Upload)); err != nil {
		return down, up, nil, err
	}
	if down, err = search.MeasureLine(ctx, l, c, search.Download); err != nil {
		return down, up, nil, err
	}
	if up, err = search.MeasureLine(ctx, l, c, search.Upload); err != nil {
		return down, up, nil, err
	}
	if err = l.SetRates(ctx, q.Download, q.Upload); err != nil {
		return down, up, nil, err
	}
	res, err = l.run(ctx, test)
	return down, up, res, err
}
