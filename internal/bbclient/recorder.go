package bbclient

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
	downS, upS := r.t.downS.load(), r.t.upS.load()
	down, up := sum(downS), sum(upS)
	pLast, pDown, pUp := last, down, up
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// the time the counters are read, not the tick's: a sample
			// taken late covers the time it really covers
			now := time.Now()
			ds, us := r.t.downS.load(), r.t.upS.load()
			d, u := sum(ds), sum(us)
			r.samples = append(r.samples, bbresult.Throughput{
				T:               now.Sub(r.t.start).Seconds(),
				Download:        mbps(d-down, now.Sub(last)),
				Upload:          mbps(u-up, now.Sub(last)),
				DownloadStreams: perStream(ds, downS, d-down, now.Sub(last)),
				UploadStreams:   perStream(us, upS, u-up, now.Sub(last)),
			})
			last, down, up, downS, upS = now, d, u, ds, us
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

func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

// perStream is each stream's goodput since the last sample; nil when the
// direction moved no bytes, so idle samples stay small in the JSON file.
func perStream(now, before []int64, total int64, d time.Duration) []float64 {
	if total == 0 {
		return nil
	}
	v := make([]float64, len(now))
	for i := range now {
		v[i] = mbps(now[i]-before[i], d)
	}
	return v
}
