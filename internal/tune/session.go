package tune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/sizelimit"
)

// Session is one `sqmkit tune`: a search on a running queue, a confirming
// full test, and then either the rates written to the config or the
// shaper put back where it was.
type Session struct {
	Live   *Live
	Target Target
	Budget time.Duration // total test time; 0: no limit
	Write  bool
	Root   string // for the config and the undo file
	File   string // the SQM config; "" is ROOT/etc/config/sqm
	Log    func(string)

	confirmTest func(context.Context, bbclient.Config) (*bbresult.Result, error)
}

// Outcome is what a session did.
type Outcome struct {
	Report  *Report
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
}

// maxUndo caps the undo record: a few hundred bytes when sqmkit wrote it.
const maxUndo = 64 << 10

// undoPath keeps the rates a --write replaced, for --undo.
func undoPath(root string) string { return filepath.Join(root, "etc", "sqmkit", "tune-undo.json") }

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
	q := l.Target.Queue
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
	cfg := Config{Target: s.Target, OpenDown: open(q.Download), OpenUp: open(q.Upload), RatePerGoodput: RatePerGoodput(l.Target),
		AckUncounted: AckUncounted(l.Target), ProbeKbit: ProbeKbit(l.Target, l.Test.ProbeInterval),
		Progress: s.Log}
	if s.Budget > 0 {
		// The budget is the whole tune's: the line measurements, one
		// confirming test and a phase to measure a missed one of its
		// phases again come off it first, and the search gets the steps
		// that are left (vdsl × cake, cd9ac87: 158 s of search and two
		// confirms made 202 s of a 180 s budget).
		fixed := l.fixedCost()
		if cfg.MaxSteps = int((s.Budget - fixed) / l.phase(l.Step)); cfg.MaxSteps < minSteps {
			return o, fmt.Errorf("a test-time budget of %v holds the line measurements and a confirming test with a phase to spare (%v) and %d search steps of %v, want %d; give a --budget of at least %v",
				s.Budget, fixed, max(0, cfg.MaxSteps), l.phase(l.Step), minSteps, (fixed + minSteps*l.phase(l.Step)).Round(time.Second))
		}
	}
	if o.Report, err = Search(ctx, l, cfg); err != nil {
		return o, err
	}
	r := o.Report
	for try := 0; ; try++ {
		s.log("confirming %d/%d kbit/s with a full test", r.Download.RateKbit, r.Upload.RateKbit)
		full := l.confirming(r.length(Bidir))
		o.ConfirmedAt = config.Rates{Download: r.Download.RateKbit, Upload: r.Upload.RateKbit}
		o.Confirm, err = s.confirm(ctx, full)
		l.Spent += l.confirmCost(r.length(Bidir))
		if err != nil {
			return o, fmt.Errorf("confirming test: %w", err)
		}
		// The goodput at the final rates is the confirming test's (the
		// bidirectional check may have lowered them below every step).
		for _, ph := range o.Confirm.Phases {
			switch Kind(ph.Name) {
			case Download:
				r.Download.GoodputKbit = int(ph.DownloadMbps * 1000)
			case Upload:
				r.Upload.GoodputKbit = int(ph.UploadMbps * 1000)
			}
		}
		k, p, missed := confirmMiss(o.Confirm, r)
		if !missed {
			break
		}
		t := r.target(k)
		judged := fmt.Sprintf("after its first %g s", Transient)
		if try == 0 {
			q, again, err := s.measureAgain(ctx, k, r.length(k), t, p)
			if err != nil {
				return o, fmt.Errorf("confirming test: %w", err)
			}
			if o.Again = again; again != nil {
				judged = fmt.Sprintf("the mean of it and one more, each after its first %g s", Transient)
			}
			if p = q; meets(t, p.AddedMedian, p.AddedP95) {
				break
			}
		}
		fail := fmt.Errorf("the confirming test missed %s in its %s phase (+%.1f/+%.1f ms, %s); nothing written", t.Name, k, p.AddedMedian, p.AddedP95, judged)
		// A miss by a little, once: the search judged every rate on a
		// mean of two phases near a bar, the confirm is one, so a rate at
		// the knee misses it about as often as it meets it (vdsl × cake,
		// 7aa51ff: bidirectional +5.6 ms against 5). One step down, the
		// bidirectional check's 2 %, is what the search does with a miss
		// of up to half a bar over it (missSteps), so a miss that size is
		// "a little" here too (CI at eeea12d, cable × cake: +6.4/+20.7 ms
		// at rates whose search step read +3.1/+7.6, and nothing was
		// written). A miss the search would answer with two steps or more
		// says its figures do not hold on this link now, and the confirm
		// is not the place to guess how far.
		if try > 0 || missSteps(t, p.AddedMedian, p.AddedP95) > 1 {
			return o, fail
		}
		// With no room in the budget to confirm again the lowered rates
		// still stand: they are the step the miss asks for, and the rates
		// that missed by a little are the alternative, not the old ones
		// (cable × fq_codel, 90c3088: the bidirectional phase +5.2/+8.7
		// ms, 2m44s of 3m used, and nothing was written).
		again := s.Budget == 0 || l.Spent+l.confirmCost(r.length(Bidir)) <= s.Budget
		lower := []*Choice{r.choice(k)}
		if k == Bidir {
			lower = lowered(p, t.MedianMs, &r.Download, &r.Upload)
		}
		for _, c := range lower {
			c.RateKbit = int(float64(c.RateKbit) * (1 - BidirStep))
			c.also(RuleConfirmLowered, "; lowered %.0f%% after the confirming test's %s phase missed by a little", 100*BidirStep, k)
			if !again {
				c.also(RuleNoRoomToConfirm, " (the test-time budget left no room to confirm it again)")
				c.Rules = append(c.Rules, RuleBudgetBound)
			}
		}
		r.ConfirmLowered++
		if err := l.SetRates(ctx, r.Download.RateKbit, r.Upload.RateKbit); err != nil {
			return o, err
		}
		if !again {
			o.Unconfirmed = true
			s.log("the confirming test's %s phase missed %s by a little (+%.1f/+%.1f ms): %.0f%% lower, not confirmed again: the test-time budget has no room (%v used of %v)",
				k, t.Name, p.AddedMedian, p.AddedP95, 100*BidirStep, l.Spent.Round(time.Second), s.Budget)
			break
		}
		s.log("the confirming test's %s phase missed %s by a little (+%.1f/+%.1f ms): %.0f%% lower, confirming once more", k, t.Name, p.AddedMedian, p.AddedP95, 100*BidirStep)
	}
	d, u := r.Download.RateKbit, r.Upload.RateKbit
	if !s.Write {
		return o, nil
	}
	if o.Old, err = config.WriteRates(s.Root, s.File, q.Section, config.Rates{Download: d, Upload: u}); err != nil {
		return o, err
	}
	o.Written = true
	ratestate.Clear(l.Opts.RateDir, q.Interface) // the config says it now
	b, _ := json.MarshalIndent(undo{Section: q.Section, Old: o.Old, New: config.Rates{Download: d, Upload: u}, At: time.Now().UTC()}, "", "  ")
	if err := os.MkdirAll(filepath.Dir(undoPath(s.Root)), 0o755); err == nil {
		err = os.WriteFile(undoPath(s.Root), b, 0o644)
	}
	if err != nil {
		s.log("written, but the undo record was not (%v); the old rates were %d/%d", err, o.Old.Download, o.Old.Upload)
	}
	return o, nil
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
	if st := apply.Inspect([]apply.Target{l.Target}, l.Opts)[0]; !st.Matches() {
		why := st.Err
		if why == nil {
			why = errors.New(st.Diffs[0].String())
		}
		return nil, fmt.Errorf("%s is not shaped as planned (%v); run sqmkit start first", q.Interface, why)
	}
	orig := config.Rates{Download: q.Download, Upload: q.Upload}
	return func(keep bool, err error) error {
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
func (s *Session) Sweep(ctx context.Context, c SweepConfig) (res *SweepResult, err error) {
	l := s.Live
	restore, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer func() { err = restore(false, err) }()
	l.Budget = s.Budget
	q := l.Target.Queue
	c.Target, c.Progress = s.Target, s.Log
	c.OpenDown, c.OpenUp, c.RatePerGoodput = open(q.Download), open(q.Upload), RatePerGoodput(l.Target)
	c.ProbeKbit = ProbeKbit(l.Target, l.Test.ProbeInterval)
	if c.Phase > 0 {
		l.Step = c.Phase
	}
	res, err = Sweep(ctx, l, c)
	if res != nil {
		res.Phase = l.Step
	}
	return res, err
}

// Undo writes back the rates the last --write replaced and moves the
// running shaper to them (when it runs).
func Undo(root, file string, t apply.Target, opts apply.Options) (config.Rates, error) {
	b, err := sizelimit.ReadFile(undoPath(root), maxUndo, "tune undo record")
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
	if r := apply.Rate(t, config.Rates{Download: u.Old.Download, Upload: u.Old.Upload}, "sqmkit tune --undo", opts); r.State == apply.Failed {
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
	return bbclient.Run(ctx, c)
}

// measureAgain measures the confirming test's missed phase k (figures p) once
// more at the same rates and returns the mean of the two (and the second
// test; nil when it measured none), when a second
// phase could bring the mean under the bars (p under twice each) and the
// budget holds it (fixedCost keeps a step's room; a long phase may not
// fit). The search kept the highest
// rate that passed its phases, so its own phase at these rates is the
// lucky one of its neighbours and is not pooled; a second phase of the
// confirm has no such bias. One 6 s phase of cable × cake's bidirectional
// load read +3.1 to +7.7 ms at one pair of rates (CI at eeea12d and make
// test at 56be04f: +6.4/+20.7 and +7.7/+14.8 ms in the confirm where the
// search's phases there read +3.1/+7.6 and +3.5/+9.9, and nothing was
// written), where the lab's 30 s phase at 95 % reads +4.0.
func (s *Session) measureAgain(ctx context.Context, k Kind, length Length, t Target, p Phase) (Phase, *bbresult.Result, error) {
	l := s.Live
	n := l.length(k, length)
	if p.AddedMedian >= 2*t.MedianMs || p.AddedP95 >= 2*t.P95Ms || s.Budget > 0 && l.Spent+l.phase(n) > s.Budget {
		return p, nil, nil
	}
	res, err := s.confirm(ctx, l.one(k, n))
	l.Spent += l.phase(n)
	if err != nil {
		return p, nil, err
	}
	q, err := PhaseOf(res, k)
	if err != nil {
		return p, nil, err
	}
	m := meanPhase(p, q)
	s.log("the confirming test's %s phase missed %s (+%.1f/+%.1f ms); measured again: +%.1f/+%.1f ms, judged on the mean, +%.1f/+%.1f ms",
		k, t.Name, p.AddedMedian, p.AddedP95, q.AddedMedian, q.AddedP95, m.AddedMedian, m.AddedP95)
	return m, res, nil
}

// confirmMiss is the first graded phase of a confirming test that misses
// the grade r tuned it for after its first Transient seconds, with the
// figures judged.
func confirmMiss(res *bbresult.Result, r *Report) (Kind, Phase, bool) {
	for _, ph := range res.Phases {
		if ph.Grade == "" {
			continue
		}
		p, err := PhaseOf(res, Kind(ph.Name))
		if _, _, ok := bbclient.Steady(res, ph.Name, Transient, Graded); err != nil || !ok {
			continue
		}
		if !meets(r.target(Kind(ph.Name)), p.AddedMedian, p.AddedP95) {
			return Kind(ph.Name), p, true
		}
	}
	return "", Phase{}, false
}

func (s *Session) log(format string, a ...any) {
	if s.Log != nil {
		s.Log(fmt.Sprintf(format, a...))
	}
}

// open is a rate far above any line the configured rate was near: the
// shaper stays in place but never limits while the line is measured.
func open(configured int) int { return min(configured*4, 10_000_000) }

// RatePerGoodput is the shaper rate one kbit/s of TCP goodput needs on
// t's link: goodput counts the payload of a full-size segment, the shaper
// its whole frame (frameBytes): 1500 + 18 bytes are 32 ATM cells, 1696
// bytes, 17 % more than the payload, where Ethernet framing costs 5 %.
func RatePerGoodput(t apply.Target) float64 { return frameBytes(t, mtu) / (mtu - tcpip) }

// ProbeKbit is the shaper rate the test's own probes take in each
// direction: one small packet per interval, whose framing weighs on a slow
// link (1 Mbit/s ATM: three cells each, 127 kbit/s at 10 ms, 13 % of the
// line), so a line measured by its streams' goodput alone reads low there.
func ProbeKbit(t apply.Target, interval time.Duration) float64 {
	if interval <= 0 {
		return 0
	}
	const udpip = 8 + 20
	return frameBytes(t, bbproto.ProbeDefaultSize+udpip) * 8 / 1000 / interval.Seconds()
}

// frameBytes is what t's shaper counts for an IP packet of ipLen bytes:
// the link's cost (wireBytes) where the plan compensates the overhead;
// nsstbl counts the frame on the device it shapes (nssHeader; no cells,
// no minimum), whatever overhead sized its mtu.
func frameBytes(t apply.Target, ipLen float64) float64 {
	if t.Queue.Backend == config.NSS {
		return ipLen + nssHeader(t.Facts)
	}
	return wireBytes(t, ipLen)
}

// nssHeader is the part of a packet's framing nsstbl counts
// (docs/design.md, "NSS shapers belong on the physical port"): none on a
// PPP device, where it sees bare IP; on an Ethernet port the 14-byte
// header, and under PPPoE also the 6-byte PPPoE header and the 2-byte PPP
// protocol id, which are inside the frame there. A VLAN tag rides in the
// packet's metadata on Linux, outside the count. Counting 14 where the
// port carries 22 took the uncounted share of an ACK for 57 % more than it
// is (vdsl-pppoe-vlan7 × nss, 0a2e127: 199 kbit/s held back from the
// upload beside the download, where its ACKs fall short by 127, and the
// upload ended at 96.6 % of the sweep's best).
func nssHeader(f linkinfo.Facts) float64 {
	switch {
	case f.Kind == "ppp":
		return 0
	case f.Proto == "pppoe":
		return 14 + 8
	}
	return 14
}

// wireBytes is what an IP packet of ipLen bytes costs on t's link as the
// plan models it: the packet and the per-packet overhead, at least the
// minimum frame (mpu), padded into 53-byte cells of 48 on ATM.
func wireBytes(t apply.Target, ipLen float64) float64 {
	over, least := 14.0, 0.0
	if p, err := plan.Build(t.Queue, t.Facts); err == nil && len(p.Dirs) > 0 {
		over, least = float64(p.Dirs[0].Overhead), float64(p.Dirs[0].MPU)
	}
	frame := max(ipLen+over, least)
	if t.Queue.LinkLayer == config.LinkATM {
		frame = math.Ceil(frame/48) * 53
	}
	return frame
}

// AckUncounted is the shaper rate a direction's count misses per kbit/s of
// the other direction's goodput: that direction's ACKs (one per two
// full-size segments, a receiver's delayed ACK) cost more on the link,
// relative to a full-size frame, than the shaper counts. 0 where the plan
// compensates the overhead; on nss the line is measured in nsstbl's bytes,
// which fit full-size frames and undercount small ones (cable: 66 bytes
// counted of an ACK's 70, about 50 kbit/s of an 8 Mbit/s upload beside a
// 38 Mbit/s download; the lab's cable × nss upload at its line queued
// only with the download loaded).
func AckUncounted(t apply.Target) float64 {
	if t.Queue.Backend != config.NSS {
		return 0
	}
	scaled := wireBytes(t, tcpip) * frameBytes(t, mtu) / wireBytes(t, mtu)
	return max(0, scaled-frameBytes(t, tcpip)) / (2 * (mtu - tcpip))
}

// The packet sizes RatePerGoodput assumes: a full-size IPv4 packet and its
// IPv4+TCP headers with timestamps. IPv6's header is 20 bytes longer, so
// the same goodput takes v6PerGoodput times the rate.
const (
	mtu, tcpip   = 1500.0, 52.0
	v6PerGoodput = (mtu - tcpip) / (mtu - tcpip - 20)
)
