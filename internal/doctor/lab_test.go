package doctor

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// The wondershaper-era findings need sfq, prio and police, which only the
// lab's guest kernel has; the lab runs this test (TestLab*) in the VM and
// fails when it skips there.

// wondershaperIDs are the findings of docs/design.md, "What breaks SQM silently", the old tree must produce.
var wondershaperIDs = []string{"sfq-perturb", "ingress-policer", "ipv4-only-filter", "icmp-priority",
	"ack-priority", "multiband-fifo", "fifo-depth", "subclass-ceil"}

func TestLabWondershaper(t *testing.T) {
	tctest.NeedRoot(t)
	cases := []struct {
		name  string
		tree  []string
		wants bool // whether every wondershaper finding must appear (else none may)
	}{
		{name: "wondershaper-era tree", wants: true, tree: []string{
			// 2 Mbit/s uplink: the interactive class gets the link, bulk
			// 90% and 80% with ceil defaulting to the rate.
			"tc qdisc add dev wan root handle 1: htb default 20",
			"tc class add dev wan parent 1: classid 1:1 htb rate 2mbit burst 6k",
			"tc class add dev wan parent 1:1 classid 1:10 htb rate 2mbit burst 6k prio 1",
			"tc class add dev wan parent 1:1 classid 1:20 htb rate 1800kbit burst 6k prio 2",
			"tc class add dev wan parent 1:1 classid 1:30 htb rate 1600kbit burst 6k prio 2",
			"tc qdisc add dev wan parent 1:10 handle 10: prio bands 3",
			"tc qdisc add dev wan parent 10:1 handle 101: pfifo limit 127",
			"tc qdisc add dev wan parent 10:2 handle 102: pfifo limit 127",
			"tc qdisc add dev wan parent 10:3 handle 103: pfifo limit 127",
			"tc qdisc add dev wan parent 1:20 handle 20: sfq perturb 10",
			"tc qdisc add dev wan parent 1:30 handle 30: sfq perturb 10",
			"tc filter add dev wan parent 1: protocol ip prio 10 u32 match ip protocol 1 0xff flowid 1:10",
			"tc filter add dev wan parent 1: protocol ip prio 10 u32 match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10",
			"tc filter add dev wan parent 1: protocol ip prio 18 u32 match ip dst 0.0.0.0/0 flowid 1:20",
			"tc qdisc add dev wan handle ffff: ingress",
			"tc filter add dev wan parent ffff: protocol ip prio 50 u32 match ip src 0.0.0.0/0 police rate 4mbit burst 10k drop flowid :1",
		}},
		{name: "htb and fq_codel both ways", tree: []string{
			"tc qdisc add dev wan root handle 1: htb default 1",
			"tc class add dev wan parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 1514",
			"tc qdisc add dev wan parent 1:1 handle 10: fq_codel limit 400 target 5ms interval 100ms",
			"ip link add ifb4wan type ifb",
			"ip link set ifb4wan up",
			"tc qdisc add dev ifb4wan root handle 1: htb default 1",
			"tc class add dev ifb4wan parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 1514",
			"tc qdisc add dev ifb4wan parent 1:1 handle 10: fq_codel limit 400 target 5ms interval 100ms",
			"tc qdisc add dev wan handle ffff: ingress",
			"tc filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4wan",
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tctest.NewNetns(t, fmt.Sprintf("lab%d", i))
			needKernel(t, ns)
			peer := wire(t, ns)
			for _, l := range tc.tree {
				f := strings.Fields(l)
				ns.Exec(t, f[0], f[1:]...)
			}
			send(t, ns, "10.77.0.3:9") // out of wan, through its tree
			send(t, ns, "10.78.0.3:9") // out of wanpeer, into wan's ingress
			r := Check(Input{Now: collectIn(t, ns, peer), Devices: []string{"wan"}})
			got := ids(r)
			for _, id := range wondershaperIDs {
				if n := got["warn "+id]; tc.wants != (n > 0) {
					t.Errorf("warn %s: %d findings, want present=%v", id, n, tc.wants)
				}
			}
			if tc.wants {
				// the 500 packets sent into wan's ingress all met the policer
				// (4 Mbit/s, 10 kB burst: most are dropped), so its evidence must
				// count them: "0 of 0" means live counters went unread
				ev := evidence(r, "ingress-policer")
				var dropped, seen int
				if i := strings.Index(ev, "policer dropped "); i < 0 {
					t.Errorf("policer evidence %q has no counts", ev)
				} else if _, err := fmt.Sscanf(ev[i:], "policer dropped %d of %d pkt", &dropped, &seen); err != nil || seen != 500 || dropped == 0 || dropped > seen {
					out, _ := exec.Command("ip", "netns", "exec", ns.Name, "tc", "-s", "filter", "show", "dev", "wan", "parent", "ffff:").CombinedOutput()
					t.Errorf("policer evidence %q, want 500 packets seen and some dropped; live output:\n%s", ev, out)
				}
			}
			if !tc.wants && r.Status != OK {
				t.Errorf("status %s, want ok", r.Status)
			}
			if got["ok egress"] != 1 {
				t.Errorf("no ok egress finding")
			}
			if t.Failed() || testing.Verbose() {
				t.Log("\n" + dump(r))
			}
		})
	}
}

// needKernel skips unless the kernel has every qdisc, classifier and
// action the cases use; the host kernel lacks all but htb, pfifo and u32.
func needKernel(t *testing.T, ns *tctest.Netns) {
	t.Helper()
	tc := func(args ...string) ([]byte, error) {
		return exec.Command("ip", append([]string{"netns", "exec", ns.Name, "tc"}, args...)...).CombinedOutput()
	}
	var missing []string
	for _, p := range []struct {
		name     string
		add, del []string
	}{
		{"sfq", []string{"qdisc", "add", "dev", "wan", "root", "sfq"}, []string{"qdisc", "del", "dev", "wan", "root"}},
		{"prio", []string{"qdisc", "add", "dev", "wan", "root", "prio"}, []string{"qdisc", "del", "dev", "wan", "root"}},
		{"fq_codel", []string{"qdisc", "add", "dev", "wan", "root", "fq_codel"}, []string{"qdisc", "del", "dev", "wan", "root"}},
		{"police", []string{"action", "add", "action", "police", "rate", "1mbit", "burst", "10k", "drop", "index", "1"},
			[]string{"action", "del", "action", "police", "index", "1"}},
	} {
		if out, err := tc(p.add...); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", p.name, strings.Join(strings.Fields(string(out)), " ")))
			continue
		}
		if out, err := tc(p.del...); err != nil {
			t.Fatalf("tc %s: %v: %s", strings.Join(p.del, " "), err, out)
		}
	}
	if len(missing) > 0 {
		t.Skipf("this kernel lacks %s; the lab's guest kernel has them (sqmkit-lab kerneltests runs this test there)", strings.Join(missing, ", "))
	}
}

// wire gives wan 10.77.0.1 with a static neighbour 10.77.0.3, so packets to
// it cross wan's egress unanswered, and wanpeer 10.78.0.2 with neighbour
// 10.78.0.3 at wan's MAC, so packets to it arrive on wan's ingress. It
// returns wan's MAC.
func wire(t *testing.T, ns *tctest.Netns) string {
	t.Helper()
	mac := strings.TrimSpace(ns.Exec(t, "cat", "/sys/class/net/wan/address"))
	for _, l := range []string{
		"ip addr add 10.77.0.1/24 dev wan",
		"ip neigh add 10.77.0.3 lladdr 02:00:00:00:00:03 dev wan",
		"ip addr add 10.78.0.2/24 dev wanpeer",
		"ip neigh add 10.78.0.3 lladdr " + mac + " dev wanpeer",
	} {
		f := strings.Fields(l)
		ns.Exec(t, f[0], f[1:]...)
	}
	return mac
}

// send writes 500 datagrams of 1000 bytes to addr from inside the
// namespace; full queues and the policer drop some, the counters move.
// evidence joins the evidence of the first finding with the given id.
func evidence(r *Diagnosis, id string) string {
	for _, f := range r.Findings {
		if f.ID == id {
			return strings.Join(f.Evidence, "; ")
		}
	}
	return ""
}

func send(t *testing.T, ns *tctest.Netns, addr string) {
	t.Helper()
	ns.Do(t, func() {
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1000)
		for i := 0; i < 500; i++ {
			c.Write(buf)
		}
	})
}

// collectIn reads the namespace's state the way `sqmkit doctor` does: tc
// runs inside it, and /sys is read through a process that `ip netns exec`
// gave the namespace's sysfs, as /proc/PID/root.
func collectIn(t *testing.T, ns *tctest.Netns, mac string) Sample {
	t.Helper()
	holder := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	root := fmt.Sprintf("/proc/%d/root", holder.Process.Pid)
	for i := 0; ; i++ {
		// exec'd once its sysfs is mounted: then wan's address is visible
		if b, err := os.ReadFile(root + "/sys/class/net/wan/address"); err == nil && strings.TrimSpace(string(b)) == mac {
			break
		}
		if i == 100 {
			t.Fatalf("%s never showed the namespace's /sys", root)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var s Sample
	var err error
	ns.Do(t, func() { s, err = Collect(root, (&tc.Runner{}).Read, []string{"wan"}) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}
