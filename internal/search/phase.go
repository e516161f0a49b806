package search

import (
	"fmt"
	"math"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Transient is the start of every loaded phase that tune leaves out of its
// judgement: the slow-start overshoot into the modem's FIFO that an
// ingress shaper, behind the bottleneck, cannot prevent (0.3–0.8 s in the
// lab, at any shaper rate below the line). In a 6 s phase it is a tenth of
// the probes, i.e. it would be the p95 and make every rate miss.
const Transient = 1.5

// Graded is the length, in seconds, of the loaded phase a step stands
// for: the one the lab grades, and its sweep (tune's ground truth)
// measures, 30 s. A short step whose start-up still drained past
// Transient is judged as that phase (bbresult.Steady).
const Graded = 30.0

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
		if med, p95, ok := bbresult.Steady(res, ph.Name, Transient, Graded); ok {
			p.AddedMedian, p.AddedP95 = med, p95
		}
		for i := range res.CPU {
			if res.CPU[i].Phase == ph.Name {
				p.CPU = &res.CPU[i]
			}
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
