package tune

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/bbserver/bbservertest"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/rpm"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
)

// fakeKernel adapts tcfake to apply.Kernel (the simulated kernel shapes
// nothing: loopback traffic is never bloated, so tune finds the line rate).
type fakeKernel struct{ *tcfake.Kernel }

func (f fakeKernel) Link(name string) apply.Link {
	return apply.Link(f.Kernel.Link(name))
}

const sqmFile = `# tuned by hand before
config queue 'wan'
	option enabled '1'
	option interface 'wan'
	option download '20000'
	option upload '10000'
	option qdisc 'cake'
`

// session starts the queue of sqmFile on a fake kernel and returns a
// session against an in-process server.
func session(t *testing.T, write bool) (*Session, fakeKernel, func()) {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(sqmFile), 0o644)
	qs, err := config.Resolve(root, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	k := fakeKernel{&tcfake.Kernel{}}
	k.AddDevice("wan", true)
	tg := apply.Target{Queue: qs[0], Facts: linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, Kind: "veth"}}
	opts := apply.Options{Kernel: k, RateDir: t.TempDir(), Log: func(s string) { t.Log(s) }}
	if r := apply.Start([]apply.Target{tg}, opts)[0]; r.State != apply.Started {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	addr, stop := bbservertest.Serve(t, "127.0.0.1", bbserver.Config{MaxBytes: 1e15, MaxTests: 1000, PerIP: 1000})
	test := bbclient.Config{Server: addr, Streams: 2, ProbeInterval: 10 * time.Millisecond}
	return &Session{
		Live:   &Live{Target: tg, Opts: opts, Test: test, Idle: 200 * time.Millisecond, Step: 400 * time.Millisecond, Line: 4 * time.Second, LineUp: 4 * time.Second},
		Target: search.APlus, Write: write, Root: root, Log: func(s string) { t.Log(s) },
	}, k, stop
}

// atRates says whether the kernel holds the queue's plan at down/up.
func atRates(t *testing.T, s *Session, k fakeKernel, down, up int) bool {
	t.Helper()
	q := s.Live.Target.Queue
	q.Download, q.Upload = down, up
	p, err := plan.Build(q, s.Live.Target.Facts)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := k.Read("wan", "ifb4wan")
	if err != nil {
		t.Fatal(err)
	}
	return len(drift.Compare(p, snap)) == 0
}

func TestSessionWriteUndo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about 15 s of loopback tests")
	}
	s, k, _ := session(t, true)
	o, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, u := o.Search.Download.RateKbit, o.Search.Upload.RateKbit
	if !o.Written || o.Old != (config.Rates{Download: 20000, Upload: 10000}) || d == 0 || u == 0 {
		t.Fatalf("outcome %+v", o)
	}
	if !atRates(t, s, k, d, u) {
		t.Errorf("the kernel is not at the written rates %d/%d", d, u)
	}
	b, _ := os.ReadFile(filepath.Join(s.Root, "etc/config/sqm"))
	if !strings.Contains(string(b), "# tuned by hand before") || !strings.Contains(string(b), "option download '") {
		t.Errorf("config after --write:\n%s", b)
	}
	qs, _ := config.Resolve(s.Root, "", nil, "")
	if qs[0].Download != d || qs[0].Upload != u {
		t.Errorf("config holds %d/%d, tune chose %d/%d", qs[0].Download, qs[0].Upload, d, u)
	}
	tg := s.Live.Target
	tg.Queue = qs[0]
	old, err := Undo(s.Root, "", tg, s.Live.Opts)
	if err != nil || old != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Fatalf("undo: %+v %v", old, err)
	}
	if !atRates(t, s, k, 20000, 10000) {
		t.Error("undo left the kernel at the tuned rates")
	}
	if qs, _ := config.Resolve(s.Root, "", nil, ""); qs[0].Download != 20000 || qs[0].Upload != 10000 {
		t.Errorf("undo left the config at %d/%d", qs[0].Download, qs[0].Upload)
	}
	if _, err := Undo(s.Root, "", tg, s.Live.Opts); err == nil || !strings.Contains(err.Error(), "nothing to undo") {
		t.Errorf("second undo: %v", err)
	}
}

// Without --write, and whenever the search fails (a server that goes
// away, an interrupt, a spent budget), the shaper ends at its old rates
// and the config is untouched.
func TestSessionRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs loopback tests of several seconds")
	}
	for _, c := range []struct {
		name string
		do   func(s *Session, stop func()) context.Context
		want string // in the error; "" for success
	}{
		{"no write", func(*Session, func()) context.Context { return context.Background() }, ""},
		{"server goes away", func(_ *Session, stop func()) context.Context {
			time.AfterFunc(6*time.Second, stop)
			return context.Background()
		}, "server"},
		{"interrupted", func(*Session, func()) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(5*time.Second, cancel)
			return ctx
		}, "cancel"},
		{"budget", func(s *Session, _ func()) context.Context { s.Budget = 7 * time.Second; return context.Background() }, "budget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, k, stop := session(t, false)
			ctx := c.do(s, stop)
			o, err := s.Run(ctx)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(strings.ToLower(err.Error()), c.want)):
				t.Fatalf("want an error about %q, got %v", c.want, err)
			}
			if o.Written {
				t.Error("written without --write")
			}
			if !atRates(t, s, k, 20000, 10000) {
				t.Error("the shaper was not restored to 20000/10000")
			}
			if b, _ := os.ReadFile(filepath.Join(s.Root, "etc/config/sqm")); string(b) != sqmFile {
				t.Errorf("config changed:\n%s", b)
			}
		})
	}
}

// The budget is the whole tune's, the confirming test included: a
// session given just enough finishes inside it, one given too little
// says how much it needs before it changes anything.
func TestSessionBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about 20 s of loopback tests")
	}
	s, k, _ := session(t, false)
	l := s.Live
	s.Budget = l.fixedCost() + search.MinSteps*l.phase(l.Step) + l.phase(l.Step)/2
	o, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.Spent > s.Budget || o.Confirm == nil {
		t.Errorf("spent %v of a %v budget (confirmed: %v)", o.Spent, s.Budget, o.Confirm != nil)
	}
	if !atRates(t, s, k, 20000, 10000) {
		t.Error("the shaper was not restored to 20000/10000")
	}
	s, _, _ = session(t, false)
	s.Budget = 10 * time.Second
	if _, err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "--budget of at least") || s.Live.Spent != 0 {
		t.Errorf("a budget too small: %v after %v of tests", err, s.Live.Spent)
	}
}

// TestMinBudget: the least budget LuCI's page offers (MinBudget, with the
// default phases) is the least the command accepts, to the second.
func TestMinBudget(t *testing.T) {
	s, _, _ := session(t, false)
	s.Live.Idle, s.Live.Step, s.Live.Line, s.Live.LineUp = DefaultIdle, DefaultStep, DefaultLine, DefaultLineUp
	if s.Live.MinBudget() != DefaultLive().MinBudget() {
		t.Fatalf("MinBudget %v, DefaultLive's %v", s.Live.MinBudget(), DefaultLive().MinBudget())
	}
	s.Budget = DefaultLive().MinBudget()
	if _, err := s.config(); err != nil {
		t.Errorf("a budget of MinBudget (%v) refused: %v", s.Budget, err)
	}
	s.Budget -= time.Second
	if _, err := s.config(); err == nil || !strings.Contains(err.Error(), "--budget of at least "+DefaultLive().MinBudget().String()) {
		t.Errorf("a budget of %v: %v", s.Budget, err)
	}
}

func TestSessionRefusesUnshaped(t *testing.T) {
	s, k, _ := session(t, false)
	k.Batch("tc", true, [][]string{{"qdisc", "del", "dev", "wan", "root"}})
	if _, err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "run sqmkit start first") {
		t.Errorf("unshaped queue: %v", err)
	}
}

// A sweep on a running queue measures every step and puts the shaper back
// at its rates, also when the server goes away mid-sweep; it never writes.
func TestSessionSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs loopback tests of several seconds")
	}
	for _, lose := range []bool{false, true} {
		s, k, stop := session(t, true)
		if lose {
			time.AfterFunc(2*time.Second, stop)
		}
		r, err := s.Sweep(context.Background(), search.SweepConfig{LineDown: 30000, LineUp: 12000, From: 0.97, To: 1.00, Step: 0.01, Phase: 600 * time.Millisecond})
		switch {
		case lose && err == nil:
			t.Error("the server went away and the sweep did not say so")
		case !lose && err != nil:
			t.Fatal(err)
		case !lose:
			// loopback is never bloated: every step passes, the best is
			// the line; 4 steps per direction, then the bidirectional
			// pair at both one-way bests, measured HoldPhases times
			if len(r.Steps) != 8+search.HoldPhases || r.BestDown != 30000 || r.BestUp != 12000 || r.Steps[8].Kind != search.Bidir || r.Steps[10].Other != 12000 {
				t.Errorf("sweep %+v", r)
			}
			// every step ran the sweep's phase, not the search's 400 ms,
			// between its two idle baselines of 200 ms
			if r.Phase != 600*time.Millisecond || s.Live.Spent != 11*time.Second {
				t.Errorf("sweep phase %v, test time %v; want 600ms, 11s", r.Phase, s.Live.Spent)
			}
		}
		if !atRates(t, s, k, 20000, 10000) {
			t.Errorf("lose=%v: the shaper was not restored to 20000/10000", lose)
		}
		if b, _ := os.ReadFile(filepath.Join(s.Root, "etc/config/sqm")); string(b) != sqmFile {
			t.Errorf("a sweep changed the config:\n%s", b)
		}
	}
}

// A long phase takes search.LongSteps steps' test time, and what the confirming
// test's long bidirectional phase costs beyond a short one fits in the
// phase the budget keeps for measuring a missed confirm phase again.
func TestPhaseLengths(t *testing.T) {
	l := &Live{Idle: time.Second, Step: 6 * time.Second, Line: 30 * time.Second, LineUp: 12 * time.Second}
	for _, c := range []struct {
		k    search.Kind
		n    search.Length
		want time.Duration
	}{
		{search.Download, search.StepPhase, 6 * time.Second},
		{search.Bidir, search.StepPhase, 6 * time.Second},
		{search.Bidir, search.LongPhase, 14 * time.Second},
		{search.Download, search.LinePhase, 30 * time.Second},
		{search.Upload, search.LinePhase, 12 * time.Second},
	} {
		if got := l.length(c.k, c.n); got != c.want {
			t.Errorf("%s phase %d: %v, want %v", c.k, c.n, got, c.want)
		}
	}
	if got, want := l.phase(l.length(search.Bidir, search.LongPhase)), search.LongSteps*l.phase(l.Step); got != want {
		t.Errorf("a long phase's test time %v, want %d steps', %v", got, search.LongSteps, want)
	}
	short, long := l.confirming(search.StepPhase), l.confirming(search.LongPhase)
	if short.Bidir != l.Step || long.Bidir != 14*time.Second || long.Download != l.Step || long.Upload != l.Step {
		t.Errorf("confirming tests: %+v, %+v", short, long)
	}
	if short.OneSegment {
		t.Errorf("a confirming test sends one segment per packet before SlowUpload")
	}
	l.SlowUpload()
	if !l.one(search.Bidir, l.Step).OneSegment || !l.confirming(search.LongPhase).OneSegment {
		t.Errorf("after SlowUpload a step or the confirming test still sends segment pairs")
	}
	if got, kept := l.confirmCost(search.LongPhase)-l.confirmCost(search.StepPhase), l.fixedCost()-l.phase(l.Line)-l.phase(l.LineUp)-l.confirmCost(search.StepPhase); got > kept {
		t.Errorf("the long confirming test costs %v more, over the %v fixedCost keeps beside the short one", got, kept)
	}
}

// An undo record is read as a regular file with a size cap and its rates
// pass the config's checks before they are written: a link to /dev/zero
// in its place, a record too large, 0/0 (which would
// stop shaping) and −5/999999999999 (which would break the next start) are
// refused and the config stays as it is.
func TestUndoRefusesBadRecords(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(sqmFile), 0o644)
	os.MkdirAll(filepath.Dir(undoPath(root)), 0o755)
	tg := apply.Target{Queue: config.Queue{Section: "wan", Interface: "wan"}}
	for _, c := range []struct {
		name, record, want string
	}{
		{"/dev/zero", "", "symbolic link"},
		{"too large", strings.Repeat(" ", 2<<20), "larger than"},
		{"both 0", `{"section":"wan","old":{"download_kbit":0,"upload_kbit":0}}`, "both 0"},
		{"out of range", `{"section":"wan","old":{"download_kbit":-5,"upload_kbit":999999999999}}`, "not a rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(undoPath(root))
			if c.name == "/dev/zero" {
				os.Symlink("/dev/zero", undoPath(root))
			} else {
				os.WriteFile(undoPath(root), []byte(c.record), 0o644)
			}
			_, err := Undo(root, "", tg, apply.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("undo: %v, want %q", err, c.want)
			}
			if b, _ := os.ReadFile(filepath.Join(root, "etc/config/sqm")); string(b) != sqmFile {
				t.Errorf("the config changed:\n%s", b)
			}
		})
	}
}

// TestSessionOverResponsiveness: with Live.Run set to a responsiveness
// server's phases (tune --server URL), the search and the confirming test
// run over that protocol, round trips only, and end with rates and the
// shaper restored as over a sqmkit serve.
func TestSessionOverResponsiveness(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about 20 s of loopback tests")
	}
	s, k, _ := session(t, false)
	srv, err := rpm.NewServer(rpm.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	s.Live.Test.Server = "https://" + ln.Addr().String() + "/config"
	var runs int
	s.Live.Run = func(ctx context.Context, c bbclient.Config) (*bbresult.Result, error) {
		runs++
		return rpm.RunPhases(ctx, rpm.PhaseConfig{Test: c, Insecure: true})
	}
	o, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Confirm == nil || !o.Confirm.RTTOnly || runs < search.MinSteps || o.Search.Download.RateKbit == 0 || o.Search.Upload.RateKbit == 0 {
		t.Fatalf("%d runs, outcome %+v, confirm %+v", runs, o.Search, o.Confirm)
	}
	if !atRates(t, s, k, 20000, 10000) {
		t.Error("the shaper was not restored to 20000/10000")
	}
}

// TestMeasuredCPU: on the router (CPURoot), a step's and the confirming
// test's run samples the CPU: a download that kept cpu0 95 % busy below
// the shaper's rate comes back CPU-bound in the result, in the phase
// search.PhaseOf reads (so the confirm's bidirectional miss is judged as
// the CPU's, search.LowerAfterConfirm), and in the costs tune records.
func TestMeasuredCPU(t *testing.T) {
	s, _, stop := session(t, false)
	defer stop()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	start := time.Now()
	write := func() {
		e := uint64(time.Since(start) / (10 * time.Millisecond)) // ticks
		stat := fmt.Sprintf("cpu  0 0 0 0 0 0 0 0\ncpu0 %d 0 0 %d 0 0 %d 0\ncpu1 %d 0 0 %d 0 0 0 0\n", e*35/100, e*5/100, e*60/100, e*10/100, e*90/100)
		// whole or not at all, as the kernel's file reads: a sampler must
		// not read it half-written
		tmp := filepath.Join(root, "proc/stat.tmp")
		os.WriteFile(tmp, []byte(stat), 0o644)
		os.Rename(tmp, filepath.Join(root, "proc/stat"))
	}
	write()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				write()
			}
		}
	}()
	l := s.Live
	l.CPURoot = root
	if err := l.SetRates(context.Background(), 100_000_000, 100_000_000); err != nil { // far above loopback's goodput: the shaper held nothing
		t.Fatal(err)
	}
	res, err := l.measured(context.Background(), l.one(search.Download, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p, err := search.PhaseOf(res, search.Download)
	if err != nil || p.CPU == nil || !p.CPU.Bound || p.CPU.Busiest != 0 || len(l.Costs) == 0 {
		t.Fatalf("phase %+v (%v), costs %+v: want the download CPU-bound on cpu0", p.CPU, err, l.Costs)
	}
	if n := strings.Join(res.Notes, " "); !strings.Contains(n, "the router's CPU was the limit") {
		t.Errorf("notes %q", res.Notes)
	}
}
