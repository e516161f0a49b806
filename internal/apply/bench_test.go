package apply

import (
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// BenchmarkStartStop times a warm full start (both directions, IFB raised,
// probe cached) and a stop on the host kernel in a test namespace, through
// the lab shim (which adds one exec per tc call). Metrics:
//   - procs/start: processes started per start (target <= 4)
//   - ms/start: mean wall time of the start alone (target <= 50)
//
// The one-per-call variant applies the same lines the sqm-scripts way, one
// process per setup, tree and teardown line plus one `tc qdisc show` per
// shaped device, under the same conditions, as the baseline.
func BenchmarkStartStop(b *testing.B) {
	for _, be := range []config.Backend{config.NSS, config.FQCodel} {
		tg := target(be)
		p, err := plan.Build(tg.Queue, tg.Facts)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(be)+"/sqmkit", func(b *testing.B) {
			benchStart(b, tg, func(o Options) {
				mustStart(b, []Target{tg}, o)
			})
		})
		b.Run(string(be)+"/one-per-call", func(b *testing.B) {
			benchStart(b, tg, func(o Options) { oneByOne(b, o.Kernel.(System).Runner, p) })
		})
	}
}

func benchStart(b *testing.B, tg Target, start func(Options)) {
	useShim(b, "")
	ns := tctest.NewNetns(b, "bench")
	ns.Do(b, func() {
		r := &tc.Runner{}
		o := Options{Kernel: System{Runner: r}, Prober: &tc.Prober{Runner: r, CacheDir: b.TempDir()}}
		mustStart(b, []Target{tg}, o) // fills the probe cache
		Stop([]Target{tg}, o)
		var startTime time.Duration
		var startProcs int64
		b.ResetTimer()
		for range b.N {
			before, t0 := r.Procs(), time.Now()
			start(o)
			startTime += time.Since(t0)
			startProcs += r.Procs() - before
			Stop([]Target{tg}, o)
		}
		b.ReportMetric(float64(startProcs)/float64(b.N), "procs/start")
		b.ReportMetric(startTime.Seconds()*1000/float64(b.N), "ms/start")
	})
}

// oneByOne starts p with one process per command, as sqm-scripts does.
func oneByOne(b *testing.B, r *tc.Runner, p *plan.Plan) {
	one := func(prog string, lines [][]string, mustWork bool) {
		for _, l := range lines {
			if _, err := r.Batch(prog, false, [][]string{l}); err != nil && mustWork {
				b.Fatal(err)
			}
		}
	}
	for _, d := range p.Dirs {
		one("tc", [][]string{{"qdisc", "show", "dev", d.Device}}, false)
		one("tc", d.Teardown, false)
		one("ip", d.Setup, false) // "link add" fails where the IFB is kept
		one("tc", d.TC, true)
	}
}

// BenchmarkRateChange times one rate change of a running queue (both
// directions, alternating between two rate pairs so every change changes
// something) next to what it replaces, a full restart at the new rates,
// on the host kernel in a test namespace through the lab shim. Metrics:
// procs/op (processes started) and ms/op (mean wall time). fq_codel only:
// the host kernel has neither cake nor fq_codel, and behind the shim the
// nss tree's read-back does not match its plan (the shim's tbf limit shows
// as the leaf's), so a rate change refuses it here; the lab runs both.
func BenchmarkRateChange(b *testing.B) {
	for _, be := range []config.Backend{config.FQCodel} {
		tg := target(be)
		rates := [2]config.Rates{{Download: 18000, Upload: 9000}, {Download: 20000, Upload: 10000}}
		b.Run(string(be)+"/rate", func(b *testing.B) {
			benchChange(b, tg, func(o Options, i int) {
				if r := Rate(tg, rates[i%2], "bench", o); r.State != Changed {
					b.Fatalf("rate: %s %v", r.State, r.Err)
				}
			})
		})
		b.Run(string(be)+"/restart", func(b *testing.B) {
			benchChange(b, tg, func(o Options, i int) {
				t := tg
				t.Queue.Download, t.Queue.Upload = rates[i%2].Download, rates[i%2].Upload
				Stop([]Target{t}, o)
				mustStart(b, []Target{t}, o)
			})
		})
	}
}

// normBuild plans with the leaf the host kernel shows behind the shim
// (norm), so a rate change's read-back matches on the host.
func normBuild(q config.Queue, f linkinfo.Facts) (*plan.Plan, error) {
	p, err := plan.Build(q, f)
	if err != nil {
		return nil, err
	}
	return norm(p), nil
}

func benchChange(b *testing.B, tg Target, change func(o Options, i int)) {
	useShim(b, "")
	ns := tctest.NewNetns(b, "rate")
	ns.Do(b, func() {
		r := &tc.Runner{}
		o := Options{Kernel: System{Runner: r}, Prober: &tc.Prober{Runner: r, CacheDir: b.TempDir()}, Build: normBuild}
		mustStart(b, []Target{tg}, o)
		var took time.Duration
		var procs int64
		b.ResetTimer()
		for i := range b.N {
			before, t0 := r.Procs(), time.Now()
			change(o, i)
			took += time.Since(t0)
			procs += r.Procs() - before
		}
		b.ReportMetric(float64(procs)/float64(b.N), "procs/op")
		b.ReportMetric(took.Seconds()*1000/float64(b.N), "ms/op")
	})
}
