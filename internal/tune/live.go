package tune

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
)

// Live is the Link of a running queue: rates change through apply.Rate
// (tc change, no teardown), phases are `sqmkit test` runs against a
// `sqmkit serve` past the bottleneck.
type Live struct {
	Target apply.Target
	Opts   apply.Options
	Test   bbclient.Config // server, family, token, streams, probe interval
	// Phase lengths: Idle before (the baseline) and after each phase, Step
	// for a search step, Line and LineUp for the line measurements of the
	// download (long enough for a cable boost to be spent) and the upload.
	Idle, Step, Line, LineUp time.Duration
	// Spent is the test time used so far (idle and load); a phase that
	// would take it past Budget (0: none) is not started.
	Spent, Budget time.Duration
}

// Transient is the start of every loaded phase that tune leaves out of its
// judgement: the slow-start overshoot into the modem's FIFO that an
// ingress shaper, behind the bottleneck, cannot prevent (0.3–0.8 s in the
// lab, at any shaper rate below the line). In a 6 s phase it is a tenth of
// the probes, i.e. it would be the p95 and make every rate miss.
const Transient = 1.5

// Graded is the length, in seconds, of the loaded phase a step stands
// for: the one the lab grades, and its sweep (tune's ground truth)
// measures, 30 s. A short step whose start-up still drained past
// Transient is judged as that phase (bbclient.Steady).
const Graded = 30.0

// rateLimited is how a server refuses a client that started too many
// tests in its last minute (bbserver, --per-ip).
const rateLimited = "rate limit:"

// Default phase lengths: a 1 s idle baseline holds 100 probes at 10 ms; 6 s
// of load reaches a steady queue at broadband rates (TCP fills any buffer
// up to a second deep within 2–3 s). The download's line is measured for
// 30 s, so that a cable boost of up to ~20 s leaves the last third
// to the sustained rate (the lab's 10 MB bucket at 120 % of 40 Mbit/s
// lasts about 20 s: its modem forwards at most ~44 Mbit/s); the
// upload's, which boosts rarely and briefly, for 12 s.
const (
	DefaultIdle   = time.Second
	DefaultStep   = 6 * time.Second
	DefaultLine   = 30 * time.Second
	DefaultLineUp = 12 * time.Second
)

// ConfirmIdle is the confirming test's idle phase, before and after.
const ConfirmIdle = 2 * time.Second

// phase is the test time of a loaded phase of n: its idle baseline
// before and after.
func (l *Live) phase(n time.Duration) time.Duration { return 2*l.Idle + n }

// LongOf is a LongPhase's loaded time: its test time, idle baselines
// included, is longSteps search steps'.
func LongOf(idle, step time.Duration) time.Duration {
	return longSteps*(2*idle+step) - 2*idle
}

// length is the loaded time of a phase of kind k, n long.
func (l *Live) length(k Kind, n Length) time.Duration {
	switch {
	case n == LinePhase && k == Upload:
		return l.LineUp
	case n == LinePhase:
		return l.Line
	case n == LongPhase:
		return LongOf(l.Idle, l.Step)
	}
	return l.Step
}

// confirming is the confirming test: an idle baseline, the three loaded
// phases (the bidirectional one bidir long: Report.length), an idle end.
func (l *Live) confirming(bidir Length) bbclient.Config {
	full := l.Test
	full.Idle, full.Download, full.Upload, full.Bidir = ConfirmIdle, l.Step, l.Step, l.length(Bidir, bidir)
	return full
}

// confirmCost is the confirming test's test time.
func (l *Live) confirmCost(bidir Length) time.Duration {
	c := l.confirming(bidir)
	return 2*c.Idle + c.Download + c.Upload + c.Bidir
}

// fixedCost is what a budget holds beside the search's steps: the line
// measurements, the confirming test and one phase to measure a missed
// confirm phase again. After a search with long bidirectional phases that
// phase pays for the confirm's long one instead: the phase most likely to
// miss there is the bidirectional one, and measuring it again would take
// a long phase, which does not fit in a step's time anyway (adsl-atm ×
// nss, 32c0f03: the search gave up a step for the confirm's long phase,
// its download's bisection ended 2.5 % wide, and the confirm's miss by a
// little had no room to be measured again).
func (l *Live) fixedCost() time.Duration {
	return l.phase(l.Line) + l.phase(l.LineUp) + l.confirmCost(StepPhase) + l.phase(l.Step)
}

// SlowUpload sends the upload one segment per packet from here on, the
// confirming test's too. On the router itself its own TCP otherwise sends
// segment pairs (its smallest TSO size), and the shaper lets a pair out
// back to back: at adsl-atm × nss's 6960 / 790 the router's bidirectional
// phase read 8–9 ms over its clients' (docs/lab-notes.md, "2026-11-28,
// afternoon"). On a fast line a pair is a fraction of a millisecond and
// a write per segment would cost the router's CPU more than it shows.
func (l *Live) SlowUpload() { l.Test.OneSegment = true }

// SetRates changes the running shaper's rates.
func (l *Live) SetRates(_ context.Context, down, up int) error {
	r := apply.Rate(l.Target, config.Rates{Download: down, Upload: up}, "sqmkit tune", l.Opts)
	if r.State == apply.Failed {
		return r.Err
	}
	return nil
}

// one is a test of one loaded phase of kind k, n long, between idle
// baselines.
func (l *Live) one(k Kind, n time.Duration) bbclient.Config {
	cfg := l.Test
	cfg.Idle, cfg.Download, cfg.Upload, cfg.Bidir = l.Idle, 0, 0, 0
	switch k {
	case Download:
		cfg.Download = n
	case Upload:
		cfg.Upload = n
	case Bidir:
		cfg.Bidir = n
	}
	return cfg
}

// Load runs one loaded phase of kind k.
func (l *Live) Load(ctx context.Context, k Kind, length Length) (Phase, error) {
	n := l.length(k, length)
	cfg := l.one(k, n)
	if l.Budget > 0 && l.Spent+l.phase(n) > l.Budget {
		return Phase{}, fmt.Errorf("the test-time budget of %v is spent (%v used); give a larger --budget", l.Budget, l.Spent)
	}
	res, err := bbclient.Run(ctx, cfg)
	for try := 0; err != nil && strings.Contains(err.Error(), rateLimited) && try < 3; try++ {
		// a server with a stricter --per-ip than the default: wait
		// for its minute to pass rather than give up the search
		select {
		case <-ctx.Done():
			return Phase{}, ctx.Err()
		case <-time.After(20 * time.Second):
		}
		res, err = bbclient.Run(ctx, cfg)
	}
	l.Spent += l.phase(n)
	if err != nil {
		return Phase{}, err
	}
	if res.Incomplete != "" {
		return Phase{}, fmt.Errorf("the test against the server was incomplete: %s", res.Incomplete)
	}
	return PhaseOf(res, k)
}

// PhaseOf takes kind k's phase out of a test result, with its goodput per
// second, judged from Transient in (the lab's sweep judges its graded
// phases so).
func PhaseOf(res *bbresult.Result, k Kind) (Phase, error) {
	for _, ph := range res.Phases {
		if ph.Name != string(k) {
			continue
		}
		p := Phase{AddedMedian: ph.AddedMedian, AddedP95: ph.AddedP95, AddedDown: math.Max(0, ph.AddedDown), AddedUp: math.Max(0, ph.AddedUp),
			DownKbit: int(math.Round(ph.DownloadMbps * 1000)), UpKbit: int(math.Round(ph.UploadMbps * 1000)), IPv6: res.Family == "ipv6"}
		if med, p95, ok := bbclient.Steady(res, ph.Name, Transient, Graded); ok {
			p.AddedMedian, p.AddedP95 = med, p95
		}
		// per-second means of the samples inside the phase
		var sum float64
		var cnt int
		sec := ph.Start + 1
		for _, s := range res.Samples.Throughput {
			if s.T <= ph.Start || s.T > ph.End {
				continue
			}
			for s.T > sec {
				if cnt > 0 {
					p.PerSecond = append(p.PerSecond, int(math.Round(sum/float64(cnt)*1000)))
				}
				sum, cnt, sec = 0, 0, sec+1
			}
			v := s.Download
			if k == Upload {
				v = s.Upload
			}
			sum, cnt = sum+v, cnt+1
		}
		if cnt > 0 && sec <= ph.End+1e-9 {
			p.PerSecond = append(p.PerSecond, int(math.Round(sum/float64(cnt)*1000)))
		}
		return p, nil
	}
	return Phase{}, fmt.Errorf("the test returned no %s phase", k)
}
