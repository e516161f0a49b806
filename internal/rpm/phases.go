package rpm

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// PhaseConfig runs sqmkit test's phases against a responsiveness server
// (RunPhases): Test's phases, streams, Tool, Progress and Log, with
// Test.Server the server's configuration URL or host.
type PhaseConfig struct {
	Test     bbclient.Config
	Insecure bool
	// HTTP1 speaks HTTP/1.1 (as the router build always does): no self
	// probes, so no in-flow latency and no RPM.
	HTTP1 bool
	// Every is how often a foreign and a self probe start [DefaultEvery].
	Every time.Duration
}

// DefaultEvery: ten round trips a second (a TCP handshake each, then TLS
// and a 1-byte GET, as the draft's foreign probe) give a 10 s phase a
// hundred samples, and a public server ten new connections a second, far
// under the draft's own 100 probe pairs a second.
const DefaultEvery = 100 * time.Millisecond

// MaxConns is the draft's MNP, the most load connections a direction
// ramps to. A public server shares its capacity with everyone testing, so
// a user may lower it (test --rpm-conns), never raise it.
const MaxConns = 16

// h2Uploads is how many uploads share each upload connection over HTTP/2:
// the server's flow-control window caps each upload's bytes in flight
// (nginx grants 64 KB a stream), where a TCP stream's window grows until
// the bottleneck's buffer is full, so one upload per connection leaves a
// bloated uplink's buffer part empty and grades it better than it is
// (TestRunPhasesWires counts them; sqmkit-lab rpm grades the upload as
// sqmkit serve's). Downloads are not capped: the client's window is ours,
// megabytes a stream.
const h2Uploads = 4

// probeTimeout: a probe not answered within it is lost.
const probeTimeout = 5 * time.Second

// RunPhases is the bufferbloat test (idle, download, upload, both, idle)
// over a responsiveness server: the load from its large-download and
// upload endpoints over HTTP/2, cfg.Test.Streams connections per loaded
// direction; latency from its small endpoint, every cfg.Every a new
// connection (whose TCP handshake is the round trip graded, one per probe,
// as the sqmkit server's UDP probe) and a GET on a load connection (the
// in-flow latency). The grades, baseline and bars are sqmkit test's
// (bbclient.AnalyzeRTT); the result has round trips only, and carries the
// RPM of the loaded phases' probes.
func RunPhases(ctx context.Context, cfg PhaseConfig) (*bbresult.Result, error) {
	if err := cfg.Test.Check(); err != nil {
		return nil, err
	}
	cfgURL, err := configURL(cfg.Test.Server)
	if err != nil {
		return nil, err
	}
	every := cfg.Every
	if every <= 0 {
		every = DefaultEvery
	}
	logf := cfg.Test.Log
	if logf == nil {
		logf = func(string) {}
	}
	w := newWire(cfg, logf)
	eps, err := w.fetchConfig(ctx, cfgURL)
	if err != nil {
		return nil, fetchFailure(cfgURL, err)
	}
	p := &phaseRun{w: w, start: time.Now(), every: every, cfg: cfg.Test}
	for _, ph := range cfg.Test.Phases() {
		p.total += ph.End
	}
	res := &bbresult.Result{SchemaVersion: bbresult.SchemaVersion, Tool: cfg.Test.Tool, Started: p.start.UTC(),
		Server: cfg.Test.Server, Streams: cfg.Test.Streams, ProbeInterval: float64(every) / 1e6}
	pctx, stopProbes := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); p.probe(pctx) }()
	go func() { defer bg.Done(); p.record(pctx) }()
	var phases []bbclient.RTTPhase
	for _, ph := range cfg.Test.Phases() {
		if ctx.Err() != nil {
			break
		}
		phases = append(phases, p.phase(ctx, ph))
	}
	stopProbes()
	bg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	host, _, _ := net.SplitHostPort(p.addr)
	res.ServerAddr = p.addr
	res.Family = "ipv4"
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		res.Family = "ipv6"
	}
	notes := []string{fmt.Sprintf("%s is a responsiveness server: its round trips are TCP handshakes, with no one-way split up and down", cfgURL)}
	if pol, err := newPolicy(cfgURL); err == nil && pol.hostNote(eps) != "" {
		notes = append(notes, pol.hostNote(eps))
	}
	if !w.multiplexed() {
		notes = append(notes, "spoken over HTTP/1.1 (the router build has no HTTP/2): no GET can share a loaded connection, so there is no in-flow latency and no RPM")
	} else {
		notes = append(notes, fmt.Sprintf("%d uploads at once on each upload connection (HTTP/2): the server's flow control caps each upload's bytes in flight", p.transfers(true)))
	}
	if p.lost > 0 {
		notes = append(notes, fmt.Sprintf("%d probes got no answer within %v (counted as lost under 'up': this server cannot tell which way); the last: %v", p.lost, probeTimeout, p.lastErr))
	}
	if p.failed > 0 {
		res.Incomplete = fmt.Sprintf("%d load connections failed; the first: %v", p.failed, p.firstFail)
		notes = append(notes, res.Incomplete)
	}
	bbclient.AnalyzeRTT(res, bbclient.RTTRun{Probes: p.probes, Phases: phases, Throughput: p.throughput, InFlow: p.inflow, Notes: notes,
		Why: [2]string{p.why("large-download", eps.Large, 0), p.why("upload", eps.Upload, 1)}})
	// an RPM, like a grade, is of a link the test loaded
	if v := p.loadedLat.means().rpm(); v == v && res.Incomplete == "" { // not NaN
		res.RPM = &bbresult.RPM{URL: cfgURL, RPM: v}
		for _, ph := range res.Phases {
			res.RPM.DownloadMbps = max(res.RPM.DownloadMbps, ph.DownloadMbps)
			res.RPM.UploadMbps = max(res.RPM.UploadMbps, ph.UploadMbps)
		}
	}
	return res, nil
}

// phaseRun is one RunPhases: its probes and the load connections of the
// phase running.
type phaseRun struct {
	w     wire
	cfg   bbclient.Config
	start time.Time
	total time.Duration
	every time.Duration

	mu         sync.Mutex
	name       string
	loaders    []dirLoader
	loaded     bool
	probes     []bbclient.RTTProbe
	inflow     []bbresult.InFlow
	throughput []bbresult.Throughput
	loadedLat  latencies // the loaded phases' probes, for the RPM
	addr       string
	lost       int
	lastErr    error
	failed     int
	firstFail  error
	dirFail    [2]error // each direction's first failed load (download, upload)
	redirected [2]int   // redirects each direction's loads were answered with
}

// why is what the client saw of a direction's load (d: 0 download, 1
// upload) at the server's endpoint u, for a phase whose load never flowed.
func (p *phaseRun) why(endpoint string, u fmt.Stringer, d int) string {
	if err := p.dirFail[d]; err != nil {
		return fmt.Sprintf("the server's %s endpoint %s failed: %v", endpoint, u, err)
	}
	// a chain still being followed when the phase ended failed nothing
	// yet (a busy host's round trips are slow)
	if n := p.redirected[d]; n > 0 {
		return fmt.Sprintf("the server's %s endpoint %s answered the load's requests with %d redirects and moved no data", endpoint, u, n)
	}
	return fmt.Sprintf("the server's %s endpoint %s kept its connections open without moving data", endpoint, u)
}

type dirLoader struct {
	load
	up bool
}

// dirIndex is a direction's index in a pair: 0 download, 1 upload.
func dirIndex(up bool) int {
	if up {
		return 1
	}
	return 0
}

// transfers is how many objects each load connection of a direction
// moves at once.
func (p *phaseRun) transfers(up bool) int {
	if up && p.w.multiplexed() {
		return h2Uploads
	}
	return 1
}

// phase runs one phase: its load connections for its length.
func (p *phaseRun) phase(ctx context.Context, ph bbclient.RTTPhase) bbclient.RTTPhase {
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var ls []dirLoader
	if ph.Loaded {
		for _, up := range []bool{false, true} {
			if up && ph.Name == bbresult.PhaseDownload || !up && ph.Name == bbresult.PhaseUpload {
				continue
			}
			for range p.cfg.Streams {
				l := dirLoader{p.w.newLoad(up), up}
				ls = append(ls, l)
				for range p.transfers(up) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for lctx.Err() == nil {
							if err := l.transfer(lctx); err != nil && lctx.Err() == nil {
								p.mu.Lock()
								if p.failed++; p.firstFail == nil {
									p.firstFail = err
								}
								if d := dirIndex(up); p.dirFail[d] == nil {
									p.dirFail[d] = err
								}
								p.mu.Unlock()
								return
							}
						}
					}()
				}
			}
		}
	}
	length := ph.End
	ph.Start = time.Since(p.start)
	p.mu.Lock()
	p.name, p.loaders, p.loaded = ph.Name, ls, ph.Loaded
	p.mu.Unlock()
	if p.cfg.Log != nil {
		p.cfg.Log(fmt.Sprintf("phase %s: %v", ph.Name, length))
	}
	select {
	case <-time.After(length):
	case <-ctx.Done():
	}
	ph.End = time.Since(p.start)
	for _, l := range ls {
		if l.up {
			ph.Up += l.moved()
		} else {
			ph.Down += l.moved()
		}
	}
	p.mu.Lock()
	p.loaders, p.loaded = nil, false
	p.mu.Unlock()
	stop()
	wg.Wait()
	for _, l := range ls {
		l.close()
		p.mu.Lock()
		p.redirected[dirIndex(l.up)] += l.redirects()
		p.mu.Unlock()
	}
	return ph
}

// probe starts a foreign and a self probe every p.every, at most eight
// of each outstanding (a bloated queue holds them for seconds).
func (p *phaseRun) probe(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := [2]chan struct{}{make(chan struct{}, 8), make(chan struct{}, 8)}
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i, probe := range []func(context.Context){p.foreign, p.self} {
			select {
			case inflight[i] <- struct{}{}:
			default:
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-inflight[i] }()
				pctx, cancel := context.WithTimeout(ctx, probeTimeout)
				defer cancel()
				probe(pctx)
			}()
		}
	}
}

// foreign is one new connection: its TCP handshake is the probe's round
// trip; TLS and the GET count toward the RPM.
func (p *phaseRun) foreign(ctx context.Context) {
	sent := time.Since(p.start)
	f, err := p.w.foreign(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if ctx.Err() == context.Canceled {
			return // the test ended, not the path; a timeout is a loss
		}
		p.probes = append(p.probes, bbclient.RTTProbe{T: sent, Lost: true})
		p.lost++
		p.lastErr = err
		return
	}
	p.addr = f.Addr
	p.probes = append(p.probes, bbclient.RTTProbe{T: f.Start.Sub(p.start), RTT: f.Path})
	if p.loaded {
		p.loadedLat.TCP = append(p.loadedLat.TCP, ms(f.TCP))
		p.loadedLat.TLS = append(p.loadedLat.TLS, ms(f.TLS))
		p.loadedLat.HTTPForeign = append(p.loadedLat.HTTPForeign, ms(f.HTTP))
	}
}

// self is a 1-byte GET on a random load connection: the in-flow latency.
func (p *phaseRun) self(ctx context.Context) {
	l, ok := readyOne(&p.mu, func() []dirLoader { return p.loaders }, func(l dirLoader) bool { return l.ready() })
	if !ok {
		return
	}
	sent := time.Since(p.start)
	d, reused, err := l.self(ctx)
	if err != nil || !reused {
		return // a load connection ending under it is the phase's end, not a loss
	}
	dir := "down"
	if l.up {
		dir = "up"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflow = append(p.inflow, bbresult.InFlow{T: sent.Seconds(), Dir: dir, RTT: ms(d)})
	if p.loaded {
		p.loadedLat.HTTPSelf = append(p.loadedLat.HTTPSelf, ms(d))
	}
}

// record samples the load's goodput every quarter second, and reports
// progress.
func (p *phaseRun) record(ctx context.Context) {
	const every = 250 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := map[load]int64{}
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p.mu.Lock()
			var down, up int64
			seen := map[load]int64{}
			for _, l := range p.loaders {
				n := l.moved()
				seen[l.load] = n
				if l.up {
					up += n - last[l.load]
				} else {
					down += n - last[l.load]
				}
			}
			last = seen
			dt := now.Sub(prev).Seconds()
			s := bbresult.Throughput{T: now.Sub(p.start).Seconds(), Download: float64(down) * 8 / 1e6 / dt, Upload: float64(up) * 8 / 1e6 / dt}
			p.throughput = append(p.throughput, s)
			pr := bbclient.Progress{Phase: p.name, Elapsed: now.Sub(p.start), Total: p.total, DownMbps: s.Download, UpMbps: s.Upload}
			if n := len(p.probes); n > 0 && !p.probes[n-1].Lost {
				pr.RTT = ms(p.probes[n-1].RTT)
			}
			p.mu.Unlock()
			prev = now
			if p.cfg.Progress != nil {
				p.cfg.Progress(pr)
			}
		}
	}
}
