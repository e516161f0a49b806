package apply

import (
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// BenchmarkStartStop times a warm full start (both directions, IFB raised,
// probe cached) and a stop on the host kernel in a test namespace, through
// the lab shim (which adds one exec per tc call). Metrics:
//   - procs/start: processes sqmkit started per start (target <= 4)
//   - ms/start: mean wall time of the start alone (target <= 50)
//   - sqm-scripts-calls/start: processes the same tree costs run one
//     command per process, as sqm-scripts does: one per setup, tree and
//     teardown line, plus one `tc qdisc show` per shaped device.
func BenchmarkStartStop(b *testing.B) {
	for _, be := range []config.Backend{config.NSS, config.FQCodel} {
		b.Run(string(be), func(b *testing.B) {
			useShim(b, "")
			ns := tctest.NewNetns(b, "bench")
			tg := target(be)
			p, err := plan.Build(tg.Queue, tg.Facts)
			if err != nil {
				b.Fatal(err)
			}
			oneByOne := 0
			for _, d := range p.Dirs {
				oneByOne += len(d.Setup) + len(d.TC) + len(d.Teardown) + 1
			}
			ns.Do(b, func() {
				r := &tc.Runner{}
				o := Options{Runner: r, Prober: &tc.Prober{Runner: r, CacheDir: b.TempDir()}}
				mustStart(b, []Target{tg}, o) // fills the probe cache
				Stop([]Target{tg}, o)
				var startTime time.Duration
				var startProcs int64
				b.ResetTimer()
				for range b.N {
					before, t0 := r.Procs(), time.Now()
					mustStart(b, []Target{tg}, o)
					startTime += time.Since(t0)
					startProcs += r.Procs() - before
					Stop([]Target{tg}, o)
				}
				b.ReportMetric(float64(startProcs)/float64(b.N), "procs/start")
				b.ReportMetric(startTime.Seconds()*1000/float64(b.N), "ms/start")
				b.ReportMetric(float64(oneByOne), "sqm-scripts-calls/start")
			})
		})
	}
}
