package apply

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestLabCakeMQ applies use_mq on a two-queue veth with the real tc and
// kernel (the lab runs it on each of its kernels): where both know cake_mq
// the device and its IFB get a cake_mq root with a cake per queue, status
// matches and a rate change goes to the root; where either does not, the
// probe's refusal gives plain cake, said in a warning, and status matches
// that. Both must hold on the kernel they ran on.
func TestLabCakeMQ(t *testing.T) {
	ns := tctest.NewNetns(t, "cakemq")
	needCake(t, ns)
	ns.Exec(t, "ip", "link", "del", "wan")
	ns.Exec(t, "ip", "link", "add", "wan", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "wanpeer", "numtxqueues", "2", "numrxqueues", "2")
	ns.Exec(t, "ip", "link", "set", "wan", "up")
	ns.Exec(t, "ip", "link", "set", "wanpeer", "up")
	has := exec.Command("ip", "netns", "exec", ns.Name, "tc", "qdisc", "add", "dev", "wanpeer", "root", "cake_mq").Run() == nil
	if has {
		ns.Exec(t, "tc", "qdisc", "del", "dev", "wanpeer", "root")
	}
	t.Logf("tc and kernel know cake_mq: %v", has)
	tg := target(config.Cake)
	tg.Queue.UseMQ = true
	tg.Facts = linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, Kind: "veth", TXQueues: 2, RXQueues: 2}
	want := map[bool]string{true: "cake_mq", false: "cake"}[has]
	ns.Do(t, func() {
		o := options(t, &tc.Runner{}, t.TempDir())
		r := Start([]Target{tg}, o)[0]
		if r.Failed() {
			t.Fatalf("start: %s %v", r.State, r.Err)
		}
		s := kernel(t, r.Plan)
		for _, dev := range []string{"wan", "ifb4wan"} {
			root := s.Root(dev)
			if root == nil || root.Kind != want {
				t.Errorf("%s root %+v, want %s", dev, root, want)
				continue
			}
			children := 0
			for _, rec := range s.Of(dev) {
				if rec.Type == "qdisc" && rec.Kind == "cake" && strings.HasPrefix(rec.Parent, "1:") {
					children++
				}
			}
			if has && children != 2 {
				t.Errorf("%s: %d cake instances under cake_mq, want 2: %v", dev, children, ids(s))
			}
		}
		for _, d := range r.Dirs {
			if !has && (d.PlainCake == "" || len(d.Warnings) == 0) {
				t.Errorf("%s: no word of the fallback: %+v", d.Direction.Side(), d)
			}
		}
		if st := Inspect([]Target{tg}, o)[0]; !st.Matches() {
			t.Errorf("status: %v %v", st.Diffs, st.Err)
		}
		if rr := Rate(tg, config.Rates{Download: 15000, Upload: 8000}, "test", o); rr.State == Failed {
			t.Fatalf("rate change: %v", rr.Err)
		}
		if st := Inspect([]Target{{Queue: withRates(tg.Queue, 15000, 8000), Facts: tg.Facts}}, o)[0]; !st.Matches() {
			t.Errorf("status after the rate change: %v %v", st.Diffs, st.Err)
		}
	})
}

func withRates(q config.Queue, down, up int) config.Queue {
	q.Download, q.Upload = down, up
	return q
}

// needCake skips where the kernel has no cake (the host's); the lab's guest
// kernels have it, and there a skip fails the lab (kerneltests.go).
func needCake(t *testing.T, ns *tctest.Netns) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", ns.Name, "tc", "qdisc", "add", "dev", "wan", "root", "cake").CombinedOutput(); err != nil {
		t.Skipf("this kernel lacks cake (%s); the lab's guest kernels have it (sqmkit-lab kerneltests runs this test there)", strings.TrimSpace(string(out)))
	}
	ns.Exec(t, "tc", "qdisc", "del", "dev", "wan", "root")
}
