package bbtest

import (
	"context"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// sampleEvery is the throughput time series' resolution: fine enough to show
// TCP's sawtooth and a phase's ramp-up in a plot, coarse enough that one
// interval always spans several data frames even at low rates.
const (
	sampleEvery   = 100 * time.Millisecond
	progressEvery = 250 * time.Millisecond
)

// recorder samples the goodput counters and feeds the progress display.
type recorder struct {
	t       *tester
	samples []bbresult.Throughput
}

func newRecorder(t *tester) *recorder { return &recorder{t: t} }

func (r *recorder) run(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	last := time.Now()
	down, up := r.t.down.Load(), r.t.up.Load()
	pLast, pDown, pUp := last, down, up
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d, u := r.t.down.Load(), r.t.up.Load()
			r.samples = append(r.samples, bbresult.Throughput{
				T:        now.Sub(r.t.start).Seconds(),
				Download: mbps(d-down, now.Sub(last)),
				Upload:   mbps(u-up, now.Sub(last)),
			})
			last, down, up = now, d, u
			if r.t.cfg.Progress == nil || now.Sub(pLast) < progressEvery {
				continue
			}
			r.t.mu.Lock()
			pr := Progress{Phase: r.t.phase, Elapsed: now.Sub(r.t.start), Total: r.t.total}
			r.t.mu.Unlock()
			pr.DownMbps, pr.UpMbps = mbps(d-pDown, now.Sub(pLast)), mbps(u-pUp, now.Sub(pLast))
			pr.RTT = median(r.t.probes.recent(now.Sub(pLast)))
			pLast, pDown, pUp = now, d, u
			r.t.cfg.Progress(pr)
		}
	}
}

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / 1e6 / d.Seconds()
}
