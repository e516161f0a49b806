package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestLifecycleCLI drives the built binary inside a test namespace, with
// the lab tc shim on PATH standing in for the NSS tc (nss backend, flags only).
func TestLifecycleCLI(t *testing.T) {
	ns := tctest.NewNetns(t, "cli")
	bin := t.TempDir()
	for pkg, out := range map[string]string{".": "sqmkit", "../../internal/tc/tcshim": "tc"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(bin, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	root, cache := t.TempDir(), t.TempDir()
	run := func(want int, args ...string) string {
		t.Helper()
		full := append([]string{"netns", "exec", ns.Name, "env", "PATH=" + bin + ":" + os.Getenv("PATH"),
			"SQMKIT_SHIM_FQ_CODEL=pfifo", filepath.Join(bin, "sqmkit")}, args...)
		if args[0] != "status" {
			full = append(full, "--probe-cache", cache)
		}
		full = append(full, "--root", root, "--interface", "wan", "--backend", "nss", "--download", "20000", "--upload", "10000")
		out, err := exec.Command("ip", full...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("sqmkit %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return string(out)
	}
	qdiscs := func() string { return ns.Exec(t, "tc", "qdisc", "show", "dev", "wan") }

	run(0, "stop")
	if out := run(0, "start", "--dry-run"); !strings.Contains(out, "tc -batch - <<'EOF'") || !strings.Contains(out, "nsstbl") {
		t.Errorf("dry-run output lacks the batches:\n%s", out)
	}
	if q := qdiscs(); !strings.Contains(q, "noqueue") {
		t.Errorf("dry-run touched the kernel: %s", q)
	}
	if out := run(0, "start"); !strings.Contains(out, "started") {
		t.Errorf("start output:\n%s", out)
	}
	if out := run(0, "status"); !strings.Contains(out, "shaped as planned") || !strings.Contains(out, "nssfq_codel") {
		t.Errorf("status output:\n%s", out)
	}
	if out := run(0, "restart", "-v"); !strings.Contains(out, "sqmkit: exec tc -batch") {
		t.Errorf("restart -v logs no batch:\n%s", out)
	}
	run(0, "stop")
	if q := qdiscs(); strings.Contains(q, "tbf") || strings.Contains(q, "ingress") {
		t.Errorf("stop left qdiscs: %s", q)
	}
	if out := run(1, "status"); !strings.Contains(out, "differs") {
		t.Errorf("status after stop:\n%s", out)
	}
	run(0, "stop")
}

func TestLogDestination(t *testing.T) {
	cases := []struct {
		name    string
		openwrt bool // etc/openwrt_release exists under root
		logd    bool // something listens on root/dev/log
		syslog  bool // the line must reach the socket, not stderr
	}{
		{"openwrt with logd", true, true, true},
		{"openwrt without logd", true, false, false},
		{"not openwrt", false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// a short path: unix socket names are limited to 108 bytes
			root, err := os.MkdirTemp("", "sq")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			if c.openwrt {
				if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "etc/openwrt_release"), []byte("DISTRIB_ID='OpenWrt'\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var got chan string
			if c.logd {
				if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
					t.Fatal(err)
				}
				conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(root, "dev/log"), Net: "unixgram"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				got = make(chan string, 1)
				go func() {
					b := make([]byte, 2048)
					n, err := conn.Read(b)
					if err == nil {
						got <- string(b[:n])
					}
				}()
			}
			var stderr strings.Builder
			newLog(root, &stderr)("download on ifb4wan: shaped")
			if !c.syslog {
				if want := "sqmkit: download on ifb4wan: shaped\n"; stderr.String() != want {
					t.Errorf("stderr %q, want %q", stderr.String(), want)
				}
				return
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			select {
			case m := <-got:
				// <30>: facility daemon, severity info
				if !strings.HasPrefix(m, "<30>") || !strings.Contains(m, " sqmkit[") || !strings.HasSuffix(strings.TrimSpace(m), "download on ifb4wan: shaped") {
					t.Errorf("syslog got %q", m)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("nothing reached root/dev/log")
			}
		})
	}
}

// One value changed on a live tree is the same drift to status and doctor:
// both read the kernel through one model and compare it the same way.
func TestStatusAndDoctorAgreeOnDrift(t *testing.T) {
	ns := tctest.NewNetns(t, "drift")
	bin := buildSqmkit(t)
	root := t.TempDir()
	flags := []string{"--root", root, "--interface", "wan", "--backend", "fq_codel", "--download", "20000", "--upload", "10000"}
	if _, code, out := sqmkitIn(t, ns, bin, true, append([]string{"start", "--probe-cache", ""}, flags...)...); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	setup(t, ns, "tc class change dev wan parent 1: classid 1:1 htb rate 9mbit ceil 9mbit")
	const want = "rate: kernel 9 Mbit/s, config 10 Mbit/s"
	_, code, out := sqmkitIn(t, ns, bin, true, append([]string{"status"}, flags...)...)
	if code != 1 || !strings.Contains(out, "egress "+want) {
		t.Errorf("status: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	r, code, out := sqmkitIn(t, ns, bin, true, append([]string{"doctor", "--json"}, flags...)...)
	found := false
	for _, f := range r.Findings {
		found = found || f.ID == "mismatch" && slices.Contains(f.Evidence, want)
	}
	if code != 1 || !found {
		t.Errorf("doctor: exit %d, want a mismatch with %q:\n%s", code, want, out)
	}
}

// sqmkitEnv runs the binary in the namespace with extra environment and
// returns the exit code and the output.
func sqmkitEnv(t *testing.T, ns *tctest.Netns, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	full := append(append([]string{"netns", "exec", ns.Name, "env"}, env...), append([]string{bin}, args...)...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func shimEnv(bin string) []string {
	return []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SQMKIT_SHIM_FQ_CODEL=pfifo"}
}

// A PPPoE reconnect deletes and re-creates the WAN device, bare, while its
// IFB keeps its shaper. The hotplug start must shape it again (it used to
// see the shaped IFB and skip), on every backend.
func TestRecreatedDeviceShapedAgain(t *testing.T) {
	tctest.NeedRoot(t)
	bin := buildSqmkit(t)
	for _, b := range []string{"nss", "cake", "fq_codel"} {
		t.Run(b, func(t *testing.T) {
			// nss runs through the tc shim (tbf + pfifo); the others need
			// their qdisc in this kernel (the lab guest has them all)
			if b != "nss" && !hostHas(b) {
				t.Skipf("this kernel has no %s; the lab's hotplug scenario covers it", b)
			}
			ns := tctest.NewNetns(t, "recreate")
			flags := []string{"--root", t.TempDir(), "--probe-cache", "", "--interface", "wan", "--backend", b, "--download", "20000", "--upload", "10000"}
			env := shimEnv(bin)
			if code, out := sqmkitEnv(t, ns, bin, env, append([]string{"start"}, flags...)...); code != 0 {
				t.Fatalf("start: exit %d\n%s", code, out)
			}
			setup(t, ns, "ip link del wan", "ip link add wan type veth peer name wanpeer", "ip link set wan up", "ip link set wanpeer up")
			statusFlags := append([]string{"status"}, slices.Delete(slices.Clone(flags), 2, 4)...)
			if code, out := sqmkitEnv(t, ns, bin, env, statusFlags...); code == 0 {
				t.Fatalf("status right after the re-creation says shaped:\n%s", out)
			}
			code, out := sqmkitEnv(t, ns, bin, append(env, "ACTION=ifup", "INTERFACE=wan", "DEVICE=wan"), append([]string{"start", "--hotplug"}, flags...)...)
			if code != 0 || !strings.Contains(out, "started") {
				t.Fatalf("hotplug start after the re-creation: exit %d\n%s", code, out)
			}
			if code, out := sqmkitEnv(t, ns, bin, env, statusFlags...); code != 0 || !strings.Contains(out, "shaped as planned") {
				t.Errorf("status after the hotplug start: exit %d\n%s", code, out)
			}
			// and a second event changes nothing
			code, out = sqmkitEnv(t, ns, bin, append(env, "ACTION=ifupdate"), append([]string{"start", "--hotplug"}, flags...)...)
			if code != 0 || !strings.Contains(out, "skipped: already shaped as planned") {
				t.Errorf("second event: exit %d\n%s", code, out)
			}
		})
	}
}

// hostHas reports whether the running kernel knows a qdisc kind.
func hostHas(kind string) bool {
	ns := "sqmkit-probe-" + kind
	defer exec.Command("ip", "netns", "del", ns).Run()
	return exec.Command("ip", "netns", "add", ns).Run() == nil &&
		exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", kind).Run() == nil
}

// Four starts at once on one interface, twenty times: each round must end
// with the whole tree, because starts hold the interface's lock.
func TestConcurrentStarts(t *testing.T) {
	ns := tctest.NewNetns(t, "concurrent")
	bin := buildSqmkit(t)
	flags := []string{"--root", t.TempDir(), "--interface", "wan", "--backend", "nss", "--download", "20000", "--upload", "10000"}
	env := shimEnv(bin)
	for round := range 20 {
		var wg sync.WaitGroup
		codes := make([]int, 4)
		outs := make([]string, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], outs[i] = sqmkitEnv(t, ns, bin, env, append([]string{"start"}, flags...)...)
			}()
		}
		wg.Wait()
		for i := range 4 {
			if codes[i] != 0 {
				t.Fatalf("round %d start %d: exit %d\n%s", round, i, codes[i], outs[i])
			}
		}
		if code, out := sqmkitEnv(t, ns, bin, env, append([]string{"status"}, flags...)...); code != 0 {
			t.Fatalf("round %d: not fully shaped after 4 concurrent starts:\n%s", round, out)
		}
	}
}

// Without tc, stop cannot remove anything and start cannot change
// anything: each says so and exits 1, and what was there stays.
func TestStopWithoutTC(t *testing.T) {
	ns := tctest.NewNetns(t, "stopnotc")
	bin := buildSqmkit(t)
	flags := []string{"--root", t.TempDir(), "--interface", "wan", "--backend", "nss", "--download", "20000", "--upload", "10000"}
	if code, out := sqmkitEnv(t, ns, bin, shimEnv(bin), append([]string{"start"}, flags...)...); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	empty := t.TempDir()
	code, out := sqmkitEnv(t, ns, bin, []string{"PATH=" + empty}, append([]string{"stop"}, flags...)...)
	if code != 1 || !strings.Contains(out, "failed") || strings.Contains(out, ": stopped") {
		t.Errorf("stop without tc: exit %d\n%s", code, out)
	}
	if q := ns.Exec(t, "tc", "qdisc", "show", "dev", "wan"); !strings.Contains(q, "tbf") {
		t.Errorf("the shaper is gone, yet stop failed: %s", q)
	}
	// a start without tc says the tree is as it was, not "no qdisc left"
	code, out = sqmkitEnv(t, ns, bin, []string{"PATH=" + empty}, append([]string{"start", "--probe-cache", ""}, flags...)...)
	if code != 1 || strings.Contains(out, "no qdisc left") || !strings.Contains(out, "nothing changed") {
		t.Errorf("start without tc: exit %d\n%s", code, out)
	}
	if q := ns.Exec(t, "tc", "qdisc", "show", "dev", "wan"); !strings.Contains(q, "tbf") {
		t.Errorf("the shaper is gone after a start without tc: %s", q)
	}
	// and its record still says what is there, so a stop with tc removes it
	if code, out := sqmkitEnv(t, ns, bin, shimEnv(bin), append([]string{"stop"}, flags...)...); code != 0 || strings.Contains(ns.Exec(t, "tc", "qdisc", "show", "dev", "wan"), "tbf") {
		t.Errorf("stop after the failed start: exit %d\n%s", code, out)
	}
}

// `sqmkit rate` on a started queue, as tune, autorate and the lab's sweep
// call it: the kernel holds the new rates, status plans with them, and a
// full start goes back to the config's (it once panicked on every run).
func TestRateCLI(t *testing.T) {
	tctest.NeedRoot(t)
	bin := buildSqmkit(t)
	for _, b := range []struct{ backend, script, qdisc, egress string }{
		{"nss", "nss-zk.qos", "fq_codel", "qdisc"}, // the shim: tbf
		{"fq_codel", "simple.qos", "fq_codel", "class"},
		{"cake", "piece_of_cake.qos", "cake", "qdisc"},
	} {
		t.Run(b.backend, func(t *testing.T) {
			if b.backend != "nss" && !hostHas(b.backend) {
				t.Skipf("this kernel has no %s; the lab's sweep runs sqmkit rate on it", b.backend)
			}
			ns := tctest.NewNetns(t, "rate")
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "etc/config"), 0o755); err != nil {
				t.Fatal(err)
			}
			conf := fmt.Sprintf("config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n\toption download '20000'\n\toption upload '10000'\n\toption qdisc '%s'\n\toption script '%s'\n", b.qdisc, b.script)
			if err := os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			env := shimEnv(bin)
			run := func(want int, args ...string) string {
				t.Helper()
				code, out := sqmkitEnv(t, ns, bin, env, append([]string{args[0], "--root", root}, args[1:]...)...)
				if code != want {
					t.Fatalf("sqmkit %v: exit %d, want %d\n%s", args, code, want, out)
				}
				return out
			}
			// the rates sqmkit rate keeps are the router's, per device:
			// stop forgets them, so no other test's status plans with them
			t.Cleanup(func() { sqmkitEnv(t, ns, bin, env, "stop", "--root", root) })
			egress := func() string { return ns.Exec(t, "tc", b.egress, "show", "dev", "wan") }

			run(0, "start", "--probe-cache", "")
			if e := egress(); !strings.Contains(e, "10Mbit") {
				t.Fatalf("egress after start, want 10Mbit:\n%s", e)
			}
			if out := run(2, "rate", "wan"); !strings.Contains(out, "--download") {
				t.Errorf("rate without a rate:\n%s", out)
			}
			out := run(0, "rate", "--download", "15000", "--upload", "8000", "wan")
			for _, w := range []string{"changed", "15000 kbit/s", "8000 kbit/s"} {
				if !strings.Contains(out, w) {
					t.Errorf("rate output lacks %q:\n%s", w, out)
				}
			}
			if e := egress(); !strings.Contains(e, "8Mbit") {
				t.Errorf("egress after rate, want 8Mbit:\n%s", e)
			}
			// status plans with the kept rates: the whole tree, both
			// directions, is the plan at 15000/8000
			if out := run(0, "status"); !strings.Contains(out, "shaped as planned") {
				t.Errorf("status after rate:\n%s", out)
			}
			if out := run(0, "rate", "--upload", "8000"); !strings.Contains(out, "skipped") {
				t.Errorf("the same rate again:\n%s", out)
			}
			// a full start is the config's rates again
			run(0, "start", "--probe-cache", "")
			if e := egress(); !strings.Contains(e, "10Mbit") {
				t.Errorf("egress after a full start, want 10Mbit:\n%s", e)
			}
			if out := run(0, "status"); !strings.Contains(out, "shaped as planned") {
				t.Errorf("status after the full start:\n%s", out)
			}
		})
	}
}

// TestRefusedStartNotShaped: a queue whose start was refused as a whole
// prints none of its directions as shaped.
func TestRefusedStartNotShaped(t *testing.T) {
	var b strings.Builder
	r := apply.Result{Section: "wan", Device: "wan", State: apply.Failed, Err: errors.New("another start holds wan"),
		Dirs: []apply.DirResult{{Direction: config.Upload, Device: "wan"}, {Direction: config.Download, Device: "ifb4wan"}}}
	if !printResult(&b, r) || strings.Contains(b.String(), ": shaped") || !strings.Contains(b.String(), "not started") {
		t.Errorf("a refused start printed:\n%s", b.String())
	}
}
