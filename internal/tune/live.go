package tune

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/search"
)

// Live is the Link of a running queue: rates change through apply.Rate
// (tc change, no teardown), phases are `sqmkit test` runs against a
// `sqmkit serve` past the bottleneck.
type Live struct {
	Target apply.Target
	Opts   apply.Options
	Test   bbclient.Config // server, family, token, streams, probe interval
	// Run runs one test; nil is bbclient.Run (a sqmkit serve). A
	// responsiveness server's runs (rpm.RunPhases) have round trips only,
	// which the search reads as no one-way split.
	Run func(context.Context, bbclient.Config) (*bbresult.Result, error)
	// CPURoot: on the router, whose CPU each phase samples under this
	// root (cpuload); "" samples nothing.
	CPURoot string
	// Costs are what each phase cost the CPU, in order (CPURoot set).
	Costs []bbresult.PhaseCPU
	rates config.Rates // the shaper's, as SetRates last left them
	// Phase lengths: Idle before (the baseline) and after each phase, Step
	// for a search step, Line and LineUp for the line measurements of the
	// download (long enough for a cable boost to be spent) and the upload.
	Idle, Step, Line, LineUp time.Duration
	// Spent is the test time used so far (idle and load); a phase that
	// would take it past Budget (0: none) is not started.
	Spent, Budget time.Duration
}

// rateLimited is how a server refuses a client that started too many
// tests in its last minute (bbserver, --per-ip).
const rateLimited = "rate limit:"

// Default phase lengths: a 1 s idle baseline holds 100 probes at 10 ms; 6 s
// of load reaches a steady queue at broadband rates (TCP fills any buffer
// up to a second deep within 2–3 s). The download's line is measured for
// 30 s, so that a cable boost of up to ~20 s leaves the last third
// to the sustained rate (a 10 MB bucket at 120 % of 40 Mbit/s
// lasts about 20 s: its modem forwards at most ~44 Mbit/s); the
// upload's, which boosts rarely and briefly, for 12 s.
const (
	DefaultIdle   = time.Second
	DefaultStep   = 6 * time.Second
	DefaultLine   = 30 * time.Second
	DefaultLineUp = 12 * time.Second
)

// DefaultBudget is tune's test time when none is given.
const DefaultBudget = 3 * time.Minute

// ConfirmIdle is the confirming test's idle phase, before and after.
const ConfirmIdle = 2 * time.Second

// phase is the test time of a loaded phase of n: its idle baseline
// before and after.
func (l *Live) phase(n time.Duration) time.Duration { return 2*l.Idle + n }

// LongOf is a LongPhase's loaded time: its test time, idle baselines
// included, is search.LongSteps search steps'.
func LongOf(idle, step time.Duration) time.Duration {
	return search.LongSteps*(2*idle+step) - 2*idle
}

// length is the loaded time of a phase of kind k, n long.
func (l *Live) length(k search.Kind, n search.Length) time.Duration {
	switch {
	case n == search.LinePhase && k == search.Upload:
		return l.LineUp
	case n == search.LinePhase:
		return l.Line
	case n == search.LongPhase:
		return LongOf(l.Idle, l.Step)
	}
	return l.Step
}

// confirming is the confirming test: an idle baseline, the three loaded
// phases (the bidirectional one bidir long: search.Result.Length), an idle end.
func (l *Live) confirming(bidir search.Length) bbclient.Config {
	full := l.Test
	full.Idle, full.Download, full.Upload, full.Bidir = ConfirmIdle, l.Step, l.Step, l.length(search.Bidir, bidir)
	return full
}

// confirmCost is the confirming test's test time.
func (l *Live) confirmCost(bidir search.Length) time.Duration {
	c := l.confirming(bidir)
	return 2*c.Idle + c.Download + c.Upload + c.Bidir
}

// fixedCost is what a budget holds beside the search's steps: the line
// measurements, the confirming test and one phase to measure a missed
// confirm phase again, which after long bidirectional phases pays for the
// confirm's long one instead (TestPhaseLengths).
func (l *Live) fixedCost() time.Duration {
	return l.phase(l.Line) + l.phase(l.LineUp) + l.confirmCost(search.StepPhase) + l.phase(l.Step)
}

// MinBudget is the least test time a budget may give: the fixed cost and
// search.MinSteps search steps (Session.config refuses less).
func (l *Live) MinBudget() time.Duration {
	return (l.fixedCost() + search.MinSteps*l.phase(l.Step)).Round(time.Second)
}

// DefaultLive is a Live with the default phase lengths, for the limits a
// caller that sets none (the LuCI page) shows and checks.
func DefaultLive() *Live {
	return &Live{Idle: DefaultIdle, Step: DefaultStep, Line: DefaultLine, LineUp: DefaultLineUp}
}

// SlowUpload sends the upload one segment per packet from here on, the
// confirming test's too: on the router its own TCP sends segment pairs,
// which the shaper lets out back to back, a delay its clients' traffic
// does not see; on a fast line a pair is too short to matter
// (TestPhaseLengths).
func (l *Live) SlowUpload() { l.Test.OneSegment = true }

// probeKbit is the shaper rate the test's own probes take in each
// direction: a probe's payload in IPv4 and UDP headers, every interval.
func (l *Live) probeKbit() float64 {
	const udpip = 20 + 8
	return plan.ProbeKbit(l.Target.Queue, l.Target.Facts, bbproto.ProbeDefaultSize+udpip, l.Test.ProbeInterval)
}

// SetRates changes the running shaper's rates.
func (l *Live) SetRates(_ context.Context, down, up int) error {
	r := apply.Rate(l.Target, config.Rates{Download: down, Upload: up}, "sqmkit tune", l.Opts)
	if r.State == apply.Failed {
		return r.Err
	}
	if down > 0 {
		l.rates.Download = down
	}
	if up > 0 {
		l.rates.Upload = up
	}
	return nil
}

// one is a test of one loaded phase of kind k, n long, between idle
// baselines.
func (l *Live) one(k search.Kind, n time.Duration) bbclient.Config {
	cfg := l.Test
	cfg.Idle, cfg.Download, cfg.Upload, cfg.Bidir = l.Idle, 0, 0, 0
	switch k {
	case search.Download:
		cfg.Download = n
	case search.Upload:
		cfg.Upload = n
	case search.Bidir:
		cfg.Bidir = n
	}
	return cfg
}

func (l *Live) run(ctx context.Context, cfg bbclient.Config) (*bbresult.Result, error) {
	if l.Run != nil {
		return l.Run(ctx, cfg)
	}
	return bbclient.Run(ctx, cfg)
}

// Load runs one loaded phase of kind k.
func (l *Live) Load(ctx context.Context, k search.Kind, length search.Length) (search.Phase, error) {
	n := l.length(k, length)
	cfg := l.one(k, n)
	if l.Budget > 0 && l.Spent+l.phase(n) > l.Budget {
		return search.Phase{}, fmt.Errorf("the test-time budget of %v is spent (%v used); give a larger --budget", l.Budget, l.Spent)
	}
	res, err := l.measured(ctx, cfg)
	l.Spent += l.phase(n)
	if err != nil {
		return search.Phase{}, err
	}
	if res.Incomplete != "" {
		return search.Phase{}, fmt.Errorf("the test against the server was incomplete: %s", res.Incomplete)
	}
	return search.PhaseOf(res, k)
}

// measured runs one test, with the router's CPU sampled when CPURoot is
// set: the result's CPU holds each loaded phase's cost (cpuload.Costs),
// kept in l.Costs too, so a step's and the confirming test's CPU-bound
// phases are seen as such (search.PhaseOf).
func (l *Live) measured(ctx context.Context, cfg bbclient.Config) (*bbresult.Result, error) {
	stop := make(chan struct{})
	stopCPU := sync.OnceFunc(func() { close(stop) })
	defer stopCPU()
	var cpu <-chan []cpuload.Sample
	if l.CPURoot != "" {
		cpu = cpuload.Sampling(l.CPURoot, l.Target.Facts.Device, stop)
	}
	res, err := l.run(ctx, cfg)
	for try := 0; err != nil && strings.Contains(err.Error(), rateLimited) && try < 3; try++ {
		// a server with a stricter --per-ip than the default: wait
		// for its minute to pass rather than give up the search
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
		}
		res, err = l.run(ctx, cfg)
	}
	stopCPU()
	if err == nil && cpu != nil {
		res.CPU = cpuload.Costs(res, <-cpu, cpuload.Shaper{Device: l.Target.Facts.Device, RPS: cpuload.RPS(l.CPURoot, l.Target.Facts.Device), XPS: cpuload.XPS(l.CPURoot, l.Target.Facts.Device), Qdisc: l.Target.Queue.Qdisc, Down: l.rates.Download, Up: l.rates.Upload})
		l.Costs = append(l.Costs, res.CPU...)
	}
	return res, err
}
