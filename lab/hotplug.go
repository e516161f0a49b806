package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// The hotplug scenario drives the OpenWrt package's iface hotplug script
// (busybox ash, installed in the router root with the service enabled) as
// netifd's hotplug-call would, on a real PPPoE session:
//
//   - a storm of stormEvents ifup/ifupdate events fired evenly over
//     stormSpan (not waiting for each other), from an unshaped link:
//     exactly one apply, the final tree as planned, and the client's
//     pings (one per 10 ms) lost in at most graftsPerApply runs of at
//     most maxGraftLoss. One apply grafts two qdiscs on pppoe-wan, its
//     root and its ingress qdisc (the IFB's root carries nothing yet),
//     and the kernel's qdisc_graft deactivates the device for either
//     (dev_deactivate, synchronize_net: parked on noop_qdisc for an RCU
//     grace period, dropping what is sent meanwhile): 0-40 ms each on the
//     lab's guest during the storm's 200 shells, the two 0.5-1.6 s apart
//     (an `ip` and a `tc` run between them), or one run when they fall
//     together. A redirect to an unshaped IFB or a second apply would
//     show as a long run or as a third one;
//   - a PPPoE reconnect (pppd re-dials on SIGHUP and re-creates pppoe-wan
//     bare) followed by its ifup event: shaped as planned again, and
//     `sqmkit autorate`, started before it as procd would, still the same
//     process, following the new tree (its log), its probes coming back
//     and its rates within its bounds (its metrics);
//   - the session ended (pppd killed, pppoe-wan gone) and its ifdown event:
//     autorate still waiting for the device, ending at once on SIGTERM,
//     and nothing of sqmkit's left where the device was.
const (
	stormEvents  = 200
	stormSpan    = 10 * time.Second
	maxGraftLoss = 10
	// graftsPerApply: pppoe-wan's root and its ingress qdisc, each a
	// moment without a qdisc in which pings can be lost (the storm's bar)
	graftsPerApply = 2
	// The client pings every 10 ms for pingCount echoes, which outlasts
	// the storm with margin; ping's own summary counts what came back.
	pingEvery = "0.01"
	pingCount = "1600"
)

func (g *guest) hotplugRuns(p *profile.Profile, backends []string) []result {
	var rs []result
	for _, b := range backends {
		r := result{Profile: p.Name, Backend: "hotplug:" + b, Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Kernel: g.kernel,
			Dir: filepath.Join(g.out, p.Name, "hotplug-"+b)}
		os.MkdirAll(r.Dir, 0o755)
		r.ended(g.hotplug(p, b, &r))
		g.say("%s/hotplug:%s: %s", p.Name, b, r.line())
		writeJSON(filepath.Join(r.Dir, "result.json"), &r)
		rs = append(rs, r)
	}
	return rs
}

// hotplugRun is one backend's hotplug scenario: the router's root, the
// environment its hotplug scripts run in, and the checks so far.
type hotplugRun struct {
	g    *guest
	t    *topo
	r    *result
	name string // the backend
	root string
	env  []string
	logf *os.File
}

func (g *guest) hotplug(p *profile.Profile, name string, r *result) error {
	if !p.Encap.PPPoE {
		return fmt.Errorf("the hotplug scenario needs a PPPoE profile (its device is re-created on reconnect)")
	}
	b, err := parseBackend(name)
	if err != nil || b.kind() != name {
		return fmt.Errorf("hotplug runs sqmkit's own backends (%s), not %q", strings.Join(sqmkitBackends, ", "), name)
	}
	logf, err := os.Create(filepath.Join(r.Dir, "commands.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	t, err := buildTopo(&shell{log: logf}, p, filepath.Join("/tmp/lab", p.Name+"-hotplug-"+name), r.Dir)
	if err != nil {
		return err
	}
	defer t.close()
	h := &hotplugRun{g: g, t: t, r: r, name: name, root: filepath.Join(t.dir, "root"), logf: logf}
	if err := h.install(p); err != nil {
		return err
	}
	stormNoise, err := h.storm()
	if err != nil {
		return err
	}
	// sqmkit autorate runs through the reconnect and the session's end, as
	// procd runs it for option autorate '1'.
	ar, err := startAutorate(g, t, h.root, h.env, r.Dir, r.DownKbit, r.UpKbit, name != "nss")
	if err != nil {
		return err
	}
	defer ar.stop()
	if err := h.reconnect(ar); err != nil {
		return err
	}
	h.sessionEnds(ar)
	r.Status = status(r.Checks)
	if stormNoise != nil && r.Status == "pass" {
		return stormNoise
	}
	return nil
}

// install writes the router's root with sqmkit's package in it, enabled,
// and the environment its scripts run in (nss: the tc shim first in PATH).
func (h *hotplugRun) install(p *profile.Profile) error {
	r, root := h.r, h.root
	r.DownKbit, r.UpKbit = p.Down*95/100, p.Up*95/100
	if err := writeRouterRoot(root, p, h.t.shapedDev(h.name), h.name, "", r.DownKbit, r.UpKbit); err != nil {
		return err
	}
	if err := installPackage(h.g, root); err != nil {
		return err
	}
	os.MkdirAll(filepath.Join(root, "etc/rc.d"), 0o755)
	if err := os.Symlink("../init.d/sqmkit", filepath.Join(root, "etc/rc.d/S50sqmkit")); err != nil {
		return err
	}
	h.env = []string{"IPKG_INSTROOT=" + root}
	if h.name == "nss" {
		shim := filepath.Join(h.t.dir, "shim")
		os.MkdirAll(shim, 0o755)
		os.Symlink(h.g.tools.tcshim, filepath.Join(shim, "tc"))
		h.env = append(h.env, "PATH="+shim+":"+os.Getenv("PATH"), "SQMKIT_REAL_TC=/usr/sbin/tc")
	}
	return nil
}

// event runs sqmkit's iface hotplug script for action on wan, as netifd
// calls it.
func (h *hotplugRun) event(action string) (string, error) {
	ev := append(slices.Clone(h.env), "ACTION="+action, "INTERFACE=wan")
	if action != "ifdown" { // netifd names the device on ifup and ifupdate only
		ev = append(ev, "DEVICE="+pppIfname)
	}
	sh := &shell{log: h.logf, env: ev}
	return sh.run(nsRouter, "busybox", "ash", "-c", `( . "$1" )`, "hotplug", filepath.Join(h.root, "etc/hotplug.d/iface/12-sqmkit"))
}

func (h *hotplugRun) status() (string, error) {
	return (&shell{log: h.logf, env: h.env}).run(nsRouter, routerSqmkit(h.root), "status", "--root", h.root)
}

func (h *hotplugRun) check(name string, got float64, want string, ok bool) {
	h.r.Checks = append(h.r.Checks, accept.Check{Name: name, Got: got, Want: want, OK: ok})
}

// storm fires stormEvents ifup and ifupdate events at once while the
// client pings the server through the router: one apply, no failure, and
// no more pings lost than the grafts of one apply. stormNoise is the
// inconclusive verdict of a storm the host kept busy.
func (h *hotplugRun) storm() (stormNoise error, err error) {
	g, t, r := h.g, h.t, h.r
	if err := g.settle("storm"); err != nil {
		return nil, err
	}
	pingLog := filepath.Join(r.Dir, "ping.log")
	ping, err := t.sh.daemon(nsClient, pingLog, "ping", "-n", "-D", "-i", pingEvery, "-c", pingCount, "-W", "1", serverIP)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	outs := make([]string, stormEvents)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range stormEvents {
		time.Sleep(time.Until(start.Add(time.Duration(i) * stormSpan / stormEvents)))
		action := "ifupdate"
		if i%2 == 0 {
			action = "ifup"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := h.event(action)
			if err != nil {
				out += "\nERROR " + err.Error()
			}
			outs[i] = out
		}()
	}
	fired := time.Since(start)
	wg.Wait()
	storm := time.Since(start)
	select {
	case <-ping.done:
	case <-time.After(30 * time.Second):
		ping.Process.Signal(syscall.SIGINT)
		<-ping.done
	}
	applies, failures := 0, 0
	for _, o := range outs {
		applies += strings.Count(o, "(section wan): started")
		if strings.Contains(o, "ERROR") || strings.Contains(o, "(section wan): failed") {
			failures++
		}
	}
	os.WriteFile(filepath.Join(r.Dir, "storm.log"), []byte(strings.Join(outs, "\n----\n")), 0o644)
	h.check(fmt.Sprintf("applies during %d events fired in %.1f s (all done after %.1f s)", len(outs), fired.Seconds(), storm.Seconds()), float64(applies), "1", applies == 1)
	h.check("events that failed", float64(failures), "0", failures == 0)
	out, err := h.status()
	h.check("status after the storm (0: shaped as planned)", exitCode(err), "0 "+lastLine(out), err == nil)
	pl, err := pingLoss(pingLog)
	if err != nil {
		return nil, err
	}
	os.WriteFile(filepath.Join(r.Dir, "ping-lost.txt"), []byte(pl.String()), 0o644)
	// The graft's window is as long as the guest takes to pass an RCU
	// grace period: a busy host stretches it, so a noisy storm's pings
	// are not graded, and the scenario, if all else passes, is
	// inconclusive.
	stormNoise = g.quietStretch("storm", start, r)
	var inc *inconclusive
	if stormNoise != nil && !errors.As(stormNoise, &inc) {
		return nil, stormNoise
	}
	if stormNoise == nil {
		runs, longest := pl.runs()
		h.check(fmt.Sprintf("runs of pings lost of %d during the storm (%d lost)", pl.sent, pl.lost()), float64(runs), fmt.Sprintf("<= %d (one apply grafts pppoe-wan's root and its ingress qdisc)", graftsPerApply), runs <= graftsPerApply && pl.sent > 500)
		h.check("longest run of pings lost", float64(longest), fmt.Sprintf("<= %d (the graft's grace period; a redirect to an unshaped IFB drops every one)", maxGraftLoss), longest <= maxGraftLoss)
	}
	return stormNoise, nil
}

// reconnect is a PPPoE reconnect: pppoe-wan comes back bare, its ifup
// event shapes it, and autorate follows the new tree.
func (h *hotplugRun) reconnect(ar *autorateRun) error {
	t := h.t
	if err := t.pppd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("pppd: %w", err)
	}
	if err := waitFor(40*time.Second, func() bool { return !t.pppUp() }); err != nil {
		return fmt.Errorf("pppoe-wan did not go down after SIGHUP to pppd")
	}
	if err := waitFor(60*time.Second, t.pppUp); err != nil {
		return fmt.Errorf("the PPPoE session did not come back within 40 s")
	}
	if err := t.modemRoute(); err != nil {
		return err
	}
	if h.name != "nss" { // nss shapes the port below, which the reconnect leaves alone
		_, err := h.status()
		h.check("status after the reconnect, before its event (1: differs)", exitCode(err), "1", err != nil)
	}
	out, err := h.event("ifup")
	os.WriteFile(filepath.Join(h.r.Dir, "reconnect.log"), []byte(out), 0o644)
	h.check("the reconnect's ifup event", exitCode(err), "0", err == nil)
	out, err = h.status()
	h.check("status after the reconnect's event (0: shaped as planned)", exitCode(err), "0 "+lastLine(out), err == nil)
	ar.checkFollowing("after the reconnect", h.check)
	return nil
}

// sessionEnds ends the PPPoE session: pppoe-wan is gone, its ifdown event
// cleans up, autorate stops, and no qdisc or IFB of it is left.
func (h *hotplugRun) sessionEnds(ar *autorateRun) {
	t := h.t
	ifbsBefore := ifbs(t.sh)
	t.pppd.Process.Signal(syscall.SIGTERM)
	<-t.pppd.done
	waitFor(10*time.Second, func() bool { return !t.pppUp() })
	out, err := h.event("ifdown")
	os.WriteFile(filepath.Join(h.r.Dir, "ifdown.log"), []byte(out), 0o644)
	h.check("the ifdown event", exitCode(err), "0", err == nil)
	ar.checkStops(h.check)
	qd, _ := t.qdiscs()
	var left []string
	kept := []string{wanPort, "ifb@" + wanPort} // nss: the port's queue, both directions
	for _, l := range strings.Split(qd, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[2] != "0:" && f[1] != "noqueue" && (h.name != "nss" || !slices.Contains(kept, f[4])) {
			left = append(left, strings.TrimSpace(l))
		}
	}
	for _, ifb := range ifbsBefore {
		if h.name != "nss" && slices.Contains(ifbs(t.sh), ifb) {
			left = append(left, "IFB "+ifb)
		}
	}
	h.check("qdiscs/IFBs left after ifdown (nss: the port's queue stays, the port is up)", float64(len(left)), "0 "+strings.Join(left, "; "), len(left) == 0)
}

func exitCode(err error) float64 {
	if err == nil {
		return 0
	}
	return 1
}

func waitFor(d time.Duration, cond func() bool) error {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return nil
		}
	}
	return fmt.Errorf("timed out after %v", d)
}

// pingRecord is what ping -D printed: how many echoes it sent and the
// sequence numbers and times of the replies, so a loss can be placed in
// time against the storm.
type pingRecord struct {
	sent    int
	replies map[int]float64 // icmp_seq -> unix time of the reply
}

func (p *pingRecord) lost() int { return p.sent - len(p.replies) }

// runs counts the runs of consecutive lost echoes and the longest.
func (p *pingRecord) runs() (runs, longest int) {
	cur := 0
	for seq := 1; seq <= p.sent+1; seq++ {
		if _, ok := p.replies[seq]; !ok && seq <= p.sent {
			cur++
			continue
		}
		if cur > 0 {
			runs++
			longest = max(longest, cur)
		}
		cur = 0
	}
	return runs, longest
}

// String lists each lost echo with its sequence number and the time of the
// reply before it.
func (p *pingRecord) String() string {
	var b strings.Builder
	last := 0.0
	for seq := 1; seq <= p.sent; seq++ {
		if t, ok := p.replies[seq]; ok {
			last = t
			continue
		}
		fmt.Fprintf(&b, "icmp_seq=%d lost (previous reply at %.3f)\n", seq, last)
	}
	return b.String()
}

// pingLoss reads ping -D's replies and its summary ("N packets
// transmitted, M received"), which must agree.
func pingLoss(path string) (*pingRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &pingRecord{replies: map[int]float64{}}
	for _, l := range strings.Split(string(b), "\n") {
		var got int
		if n, _ := fmt.Sscanf(l, "%d packets transmitted, %d received", &p.sent, &got); n == 2 {
			if got != len(p.replies) {
				return nil, fmt.Errorf("%s: summary says %d replies, the log shows %d", path, got, len(p.replies))
			}
			return p, nil
		}
		var t float64
		var seq int
		if i := strings.Index(l, "icmp_seq="); i > 0 && strings.HasPrefix(l, "[") {
			if _, err := fmt.Sscanf(l, "[%f]", &t); err == nil {
				if _, err := fmt.Sscanf(l[i:], "icmp_seq=%d", &seq); err == nil && !strings.Contains(l, "(DUP!)") {
					p.replies[seq] = t
				}
			}
		}
	}
	return nil, fmt.Errorf("%s: no ping summary", path)
}

// autorateRun is `sqmkit autorate` beside the hotplug scenario: its
// samples and rates from its metrics, its own process never restarted.
type autorateRun struct {
	sh       *shell
	d        *proc
	log      string
	min, max [2]int // kbit/s, download and upload
	stopped  bool
	// recreated: the reconnect re-creates the shaped devices (not on nss,
	// which shapes the port below pppoe-wan)
	recreated bool
}

const autorateMetrics = "127.0.0.1:9464"

func startAutorate(g *guest, t *topo, root string, env []string, dir string, down, up int, recreated bool) (*autorateRun, error) {
	srv, err := t.sh.daemon(nsServer, filepath.Join(t.logs, "sqmkit-server.log"), g.tools.sqmkit, "serve")
	if err != nil {
		return nil, err
	}
	t.procs = append(t.procs, srv)
	time.Sleep(time.Second) // listening, as startServers waits
	a := &autorateRun{sh: &shell{log: t.sh.log, env: env}, log: filepath.Join(dir, "autorate.log"), recreated: recreated,
		min: [2]int{down / 2, up / 2}, max: [2]int{down * 100 / 95, up * 100 / 95}}
	a.d, err = a.sh.daemon(nsRouter, a.log, routerSqmkit(root), "autorate", "--root", root, "--server", serverIP,
		"--min", fmt.Sprintf("%d:%d", a.min[0], a.min[1]), "--max", fmt.Sprintf("%d:%d", a.max[0], a.max[1]),
		"--metrics", autorateMetrics, "wan")
	if err != nil {
		return nil, err
	}
	// following: its probes come back before the reconnect
	if err := waitFor(20*time.Second, func() bool { m := a.metrics(); return m["sqmkit_autorate_samples_total"] > 0 }); err != nil {
		a.stop()
		return nil, fmt.Errorf("sqmkit autorate: no delay samples within 20 s (%s)", a.log)
	}
	return a, nil
}

// metrics scrapes autorate's Prometheus text: each series by its full
// name with labels; empty when it does not answer.
func (a *autorateRun) metrics() map[string]float64 {
	out, err := a.sh.run(nsRouter, "busybox", "wget", "-q", "-O", "-", "http://"+autorateMetrics+"/metrics")
	m := map[string]float64{}
	if err != nil {
		return m
	}
	for _, l := range strings.Split(out, "\n") {
		var v float64
		if f := strings.Fields(l); len(f) == 2 && !strings.HasPrefix(l, "#") {
			if _, err := fmt.Sscan(f[1], &v); err == nil {
				m[f[0]] = v
			}
		}
	}
	return m
}

// checkFollowing: the same process still runs, it found the re-created
// device's tree, its probes come back again, and its rates are in bounds.
func (a *autorateRun) checkFollowing(when string, check func(string, float64, string, bool)) {
	select {
	case <-a.d.done:
		check("autorate running "+when+" (0: it exited)", 0, "1", false)
		return
	default:
	}
	if a.recreated {
		found := waitFor(15*time.Second, func() bool {
			b, _ := os.ReadFile(a.log)
			return strings.Contains(string(b), "shaper found again")
		}) == nil
		check("autorate found the re-created tree "+when+" (1: its log says so)", one(found), "1", found)
	}
	// from here on (an idle autorate probes once a second after 30 s)
	m := a.metrics()
	from := m["sqmkit_autorate_samples_total"]
	more := waitFor(20*time.Second, func() bool {
		m = a.metrics()
		return m["sqmkit_autorate_samples_total"] >= from+5
	}) == nil
	check("autorate's delay samples "+when, m["sqmkit_autorate_samples_total"], fmt.Sprintf(">= %.0f (5 more in 20 s)", from+5), more)
	for i, dir := range []string{"download", "upload"} {
		v := m[fmt.Sprintf("sqmkit_autorate_rate_bits_per_second{direction=%q}", dir)] / 1000
		check(fmt.Sprintf("autorate's %s rate %s, kbit/s", dir, when), v, fmt.Sprintf("%d..%d", a.min[i], a.max[i]), v >= float64(a.min[i]) && v <= float64(a.max[i]))
	}
}

// checkStops: with pppoe-wan gone autorate waits for it, and a SIGTERM
// ends it at once, creating nothing.
func (a *autorateRun) checkStops(check func(string, float64, string, bool)) {
	running := true
	select {
	case <-a.d.done:
		running = false
	default:
	}
	check("autorate running after the session ended (1: it waits for the device)", one(running), "1", running)
	a.d.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.d.done:
		a.stopped = true
		check("autorate's exit on SIGTERM", float64(a.d.ProcessState.ExitCode()), "0", a.d.ProcessState.ExitCode() == 0)
	case <-time.After(5 * time.Second):
		check("autorate ends within 5 s of SIGTERM", 1, "0", false)
	}
}

func (a *autorateRun) stop() {
	if !a.stopped {
		a.d.stop()
		a.stopped = true
	}
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
