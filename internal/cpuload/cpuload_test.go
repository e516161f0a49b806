package cpuload

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Read parses a router's /proc under root: busy is all but idle, iowait
// and steal; the network receive softirqs per CPU; the process's own
// time, its children's included.
func TestRead(t *testing.T) {
	s, err := Read("testdata/router", "wan")
	if err != nil {
		t.Fatal(err)
	}
	want0 := Core{Busy: 1393280 + 32966 + 572056 + 17875, Softirq: 17875, Total: 1393280 + 32966 + 572056 + 13343292 + 6080 + 17875}
	if len(s.Cores) != 2 || s.Cores[0] != want0 {
		t.Errorf("cores %+v, want cpu0 %+v", s.Cores, want0)
	}
	if len(s.NetRx) != 2 || s.NetRx[0] != 831229 || s.NetRx[1] != 21011 || len(s.NetTx) != 2 || s.NetTx[0] != 3131 {
		t.Errorf("NET_RX %v, NET_TX %v", s.NetRx, s.NetTx)
	}
	// wan's queue vectors, not wanx's or lan's
	if len(s.IRQ) != 2 || s.IRQ[0] != 124456 || s.IRQ[1] != 9890 {
		t.Errorf("wan's interrupts %v", s.IRQ)
	}
	if s.Self != 250+130+7+3 {
		t.Errorf("self %d ticks, want 390", s.Self)
	}
	if _, err := Read(t.TempDir(), "wan"); err == nil {
		t.Error("no /proc/stat: no error")
	}
	if got := RPS("testdata/router", "wan"); got != "" {
		t.Errorf("RPS of a zero mask: %q, want off", got)
	}
	if got := XPS("testdata/router", "wan"); got != "1,2" {
		t.Errorf("XPS %q, want 1,2", got)
	}
}

// sample is two cores at t seconds: each core's busy ticks (and softirq
// ticks among them) of 100 a second, the process's own ticks.
func sample(t float64, busy0, soft0, busy1, self uint64, rx0, rx1 uint64) Sample {
	total := uint64(t * 100)
	return Sample{At: time.Unix(1000, 0).Add(time.Duration(t * float64(time.Second))),
		Cores: []Core{{Busy: busy0, Softirq: soft0, Total: total}, {Busy: busy1, Total: total}}, NetRx: []uint64{rx0, rx1}, IRQ: []uint64{rx0, rx1}, Self: self}
}

// TestCosts: each loaded phase's CPU beside its goodput. Over 10 s of a
// download at 40 Mbit/s cpu0 ran 500 of 1000 ticks (400 in softirq),
// cpu1 300, 200 of them the test's own: 0.6 cores, 15 ms per Mbit, a
// ceiling of 80 Mbit/s where cpu0 would be full. An upload phase at 9
// Mbit/s of a 20 Mbit/s shaper that kept cpu0 at 95 % is CPU-bound, and
// says so; at 9 Mbit/s of a 10 Mbit/s shaper the shaper held it.
func TestCosts(t *testing.T) {
	res := &bbresult.Result{Started: time.Unix(1000, 0), Phases: []bbresult.Phase{
		{Name: bbresult.PhaseIdleBefore, Start: 0, End: 2},
		{Name: bbresult.PhaseDownload, Start: 2, End: 12, DownloadMbps: 40, Grade: "A+"},
		{Name: bbresult.PhaseUpload, Start: 12, End: 22, UploadMbps: 9, Grade: "A"},
		{Name: bbresult.PhaseBidir, Start: 22, End: 32, Grade: "A"}, // no samples
	}}
	samples := []Sample{
		sample(0, 0, 0, 0, 0, 0, 0),
		sample(2, 10, 0, 10, 0, 100, 0),
		sample(12, 510, 400, 310, 200, 9100, 1000),
		sample(22, 1460, 1300, 410, 300, 20000, 1100),
	}
	if got := Costs(&bbresult.Result{Started: res.Started, Phases: res.Phases}, samples, Shaper{Down: 45000, Up: 10000}); len(got) != 2 || got[1].Bound {
		t.Errorf("at 90%% of the shaper's rate: %+v", got)
	}
	got := Costs(res, samples, Shaper{Device: "wan", Qdisc: "cake", Down: 45000, Up: 20000})
	if len(got) != 2 {
		t.Fatalf("%d phases costed, want 2: %+v", len(got), got)
	}
	d, u := got[0], got[1]
	if !d.From.Equal(samples[1].At) || !d.To.Equal(samples[2].At) {
		t.Errorf("download's window %v..%v, want the samples at 2 and 12 s", d.From, d.To)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if d.Phase != "download" || d.CPUs != 2 || !near(d.BusyCores, 0.6) || !near(d.MsPerMbit, 15) || d.Busiest != 0 ||
		!near(d.BusiestShare, 0.5) || !near(d.BusiestSoftirq, 0.8) || !near(d.CeilingMbps, 80) || d.Bound || !near(d.SelfCores, 0.2) || d.NetRxCPU != 0 || !near(d.NetRxShare, 0.9) || d.IRQCPU != 0 || !near(d.IRQShare, 0.9) {
		t.Errorf("download: %+v", d)
	}
	if u.Phase != "upload" || !u.Bound || !near(u.BusiestShare, 0.95) || !near(u.CeilingMbps, 9/0.95) {
		t.Errorf("upload: %+v", u)
	}
	if n := strings.Join(res.Notes, " "); !strings.Contains(n, "upload: the router's CPU was the limit: cpu0 was busy 95%") || !strings.Contains(n, "fix: spread packet processing over the 2 cores") || !strings.Contains(n, "/sys/class/net/wan/queues") || !strings.Contains(n, "fq_codel") || strings.Contains(n, "download:") {
		t.Errorf("notes: %q", res.Notes)
	}
}

// TestCostsSelf: a saturated core while the test itself took 30 % of a
// core (the router running the load over TLS) is not the router's
// ceiling: the note says the test competed and where to run it.
func TestCostsSelf(t *testing.T) {
	res := &bbresult.Result{Started: time.Unix(1000, 0), Phases: []bbresult.Phase{
		{Name: bbresult.PhaseDownload, Start: 0, End: 10, DownloadMbps: 30, Grade: "A"},
	}}
	samples := []Sample{sample(0, 0, 0, 0, 0, 0, 0), sample(10, 960, 500, 100, 300, 0, 0)}
	got := Costs(res, samples, Shaper{Qdisc: "cake", Down: 100000, Up: 20000})
	if len(got) != 1 || !got[0].Bound || math.Abs(got[0].SelfCores-0.3) > 1e-9 {
		t.Fatalf("%+v", got)
	}
	n := strings.Join(res.Notes, " ")
	if !strings.Contains(n, "this test took 30% of a core") || !strings.Contains(n, "from a computer behind the router") || strings.Contains(n, "whatever the line can do") {
		t.Errorf("notes: %q", res.Notes)
	}
}

// TestFix: the advice fits the machine: steering where one core took the
// receive softirqs of a multi-core router, fq_codel where cake ran, the
// hardware path always.
func TestFix(t *testing.T) {
	for _, c := range []struct {
		cpu   bbresult.PhaseCPU
		qdisc string
		want  []string
		not   []string
	}{
		{bbresult.PhaseCPU{CPUs: 2, NetRxCPU: 0, NetRxShare: 0.95}, "cake", []string{"spread packet processing over the 2 cores: cpu0 handled 95%", "fq_codel", "hardware offload"}, nil},
		{bbresult.PhaseCPU{CPUs: 2, NetRxShare: 0.95, RPS: "3"}, "fq_codel", []string{"hardware offload"}, []string{"spread", "costs less per packet"}},
		{bbresult.PhaseCPU{CPUs: 1, NetRxShare: 1, IRQShare: 1}, "cake", []string{"fq_codel"}, []string{"spread", "interrupts"}},
		{bbresult.PhaseCPU{CPUs: 4, IRQCPU: 2, IRQShare: 0.9, RPS: "f", Device: "eth1"}, "fq_codel", []string{"cpu2 took 90% of eth1's interrupts"}, []string{"steering"}},
		{bbresult.PhaseCPU{CPUs: 4, RPS: "f"}, "cake_mq", []string{"measure with option qdisc 'cake' too", "fq_codel"}, nil},
		{bbresult.PhaseCPU{CPUs: 4, RPS: "f"}, "cake", []string{"fq_codel"}, []string{"cake_mq"}},
	} {
		got := Fix(c.cpu, c.qdisc)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v %s: %q lacks %q", c.cpu, c.qdisc, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%+v %s: %q has %q", c.cpu, c.qdisc, got, w)
			}
		}
	}
}

// A record survives its round trip; Lowest is the bound phase at the
// lowest rate, else the lowest ceiling; a missing or bad record is none.
func TestRecord(t *testing.T) {
	root := t.TempDir()
	if _, ok := Load(root, "wan"); ok {
		t.Error("a record where none was saved")
	}
	r := Record{Section: "wan", At: time.Unix(1000, 0).UTC(), By: "tune", Qdisc: "cake", Phases: []bbresult.PhaseCPU{
		{Phase: "download", ShapedMbps: 300, CeilingMbps: 310, Bound: true},
		{Phase: "upload", ShapedMbps: 50, CeilingMbps: 120},
		{Phase: "download", ShapedMbps: 280, CeilingMbps: 290, Bound: true},
	}}
	if err := Save(root, r); err != nil {
		t.Fatal(err)
	}
	got, ok := Load(root, "wan")
	if !ok || got.By != "tune" || len(got.Phases) != 3 || !got.At.Equal(r.At) {
		t.Fatalf("loaded %+v", got)
	}
	if low := got.Lowest(); low.ShapedMbps != 280 {
		t.Errorf("lowest of bound phases: %+v", low)
	}
	r.Phases = r.Phases[1:2]
	r.Phases = append(r.Phases, bbresult.PhaseCPU{Phase: "bidirectional", ShapedMbps: 60, CeilingMbps: 90})
	if low := r.Lowest(); low.CeilingMbps != 90 {
		t.Errorf("lowest ceiling: %+v", low)
	}
	os.WriteFile(RecordPath(root, "bad"), []byte("{"), 0o644)
	if _, ok := Load(root, "bad"); ok {
		t.Error("a bad record loaded")
	}
	if r.Ceiling() != 90 || got.Ceiling() != 280 {
		t.Errorf("ceilings %v (want the lowest implied, 90) and %v (want the bound 280)", r.Ceiling(), got.Ceiling())
	}
	// the last record of another qdisc stays beside the newest, one deep
	for i, c := range []struct{ qdisc, before string }{{"cake_mq", "cake"}, {"cake_mq", "cake"}, {"cake", "cake_mq"}} {
		r.Qdisc, r.By = c.qdisc, fmt.Sprint(i)
		if err := Save(root, r); err != nil {
			t.Fatal(err)
		}
		got, _ := Load(root, "wan")
		if got.Before == nil || got.Before.Qdisc != c.before || got.Before.Before != nil {
			t.Errorf("save %d (%s): before %+v, want the last %s record alone", i, c.qdisc, got.Before, c.before)
		}
	}
}
