package apply

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// shimDir holds the lab tc shim built as "tc"; kernel tests put it first on
// PATH so nss plans (and fq_codel, which the host kernel lacks) can run.
var shimDir string

func TestMain(m *testing.M) {
	code := func() int {
		// The lab's guest runs this package's TestLab tests without a Go
		// toolchain; they need no shim, and the others say they miss it.
		if _, err := exec.LookPath("go"); err == nil && os.Geteuid() == 0 {
			dir, err := os.MkdirTemp("", "sqmkit-shim")
			if err != nil {
				panic(err)
			}
			defer os.RemoveAll(dir)
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "tc"), "github.com/sqmkit/sqmkit/internal/tc/tcshim").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "building tcshim: %v\n%s", err, out)
				return 1
			}
			shimDir = dir
		}
		return m.Run()
	}()
	os.Exit(code)
}

// useShim puts the shim (and optionally a fake in front of it) on PATH.
func useShim(t testing.TB, fake string) {
	t.Helper()
	tctest.NeedRoot(t)
	if shimDir == "" {
		tctest.Missing(t, "the tc shim was not built")
	}
	path := shimDir + ":" + os.Getenv("PATH")
	if fake != "" {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tc"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		path = dir + ":" + path
	}
	t.Setenv("PATH", path)
	t.Setenv("SQMKIT_SHIM_FQ_CODEL", "pfifo")
	t.Setenv("SHIM", filepath.Join(shimDir, "tc"))
}

func target(b config.Backend) Target {
	return Target{
		Queue: config.Queue{Section: "wan", Enabled: true, Interface: "wan", Download: 20000, Upload: 10000,
			Backend: b, IngressECN: true, LinkLayer: config.LinkNone},
		Facts: linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, Kind: "veth"},
	}
}

func options(t testing.TB, r *tc.Runner, cache string) Options {
	return Options{Kernel: System{Runner: r}, Prober: &tc.Prober{Runner: r, CacheDir: cache}, Log: func(s string) { t.Log(s) },
		Records: applied.Store{Dir: t.TempDir()}}
}

// norm maps a plan's kinds to what the host kernel shows behind the shim
// (which maps tbf back to nsstbl and its leaf to nssfq_codel, but turns a
// plain fq_codel into pfifo), so plan and kernel compare directly.
func norm(p *plan.Plan) *plan.Plan {
	c := *p
	c.Dirs = nil
	for _, d := range p.Dirs {
		nd := *d
		nd.Tree = slices.Clone(d.Tree)
		for i := range nd.Tree {
			if nd.Tree[i].Kind == "fq_codel" {
				nd.Tree[i].Kind = "pfifo"
			}
		}
		c.Dirs = append(c.Dirs, &nd)
	}
	return &c
}

// kernel reads the queue's devices back.
func kernel(t testing.TB, p *plan.Plan) *tcstats.Snapshot {
	t.Helper()
	devs := []string{p.Device}
	if p.IFB != "" && exec.Command("ip", "link", "show", "dev", p.IFB).Run() == nil {
		devs = append(devs, p.IFB)
	}
	s, err := (&tc.Runner{}).Read(devs...)
	if err != nil {
		t.Fatalf("readback: %v", err)
	}
	return s
}

// shape lists the node differences between p and the kernel.
func shape(t testing.TB, p *plan.Plan) (missing, extra []plan.Node) {
	for _, d := range drift.Compare(norm(p), kernel(t, p)) {
		switch d.Kind {
		case drift.Missing:
			missing = append(missing, d.Node)
		case drift.Extra:
			extra = append(extra, d.Node)
		}
	}
	return missing, extra
}

// checkDir asserts that direction d is either fully shaped (want) or leaves
// none of its nodes behind, and that no redirect exists without the IFB tree.
func checkDir(t testing.TB, p *plan.Plan, d *plan.Dir, want bool) {
	t.Helper()
	s := kernel(t, p)
	np := norm(p)
	var missing []plan.Node
	for _, df := range drift.Dir(np, np.Dirs[slices.Index(p.Dirs, d)], s) {
		if df.Kind == drift.Missing {
			missing = append(missing, df.Node)
		}
	}
	if want && len(missing) > 0 {
		t.Errorf("%s: shaped direction lacks %+v (kernel: %s)", d.Direction.Side(), missing, ids(s))
	}
	if !want && len(missing) != len(d.Tree) {
		t.Errorf("%s: failed direction left part of its tree: missing only %+v of %+v", d.Direction.Side(), missing, d.Tree)
	}
	noBlackHole(t, s, p.Device)
}

func ids(s *tcstats.Snapshot) string {
	var out []string
	for _, r := range s.Records {
		out = append(out, r.Dev+" "+r.ID()+" parent "+r.Parent)
	}
	return strings.Join(out, "; ")
}

// noBlackHole fails when a redirect on wan points at a device with no shaper.
func noBlackHole(t testing.TB, s *tcstats.Snapshot, wan string) {
	t.Helper()
	for _, to := range s.Redirects(wan) {
		if !s.Shaped(to) {
			t.Errorf("redirect to %s exists while %s has no shaper", to, to)
		}
	}
}

func mustStart(t testing.TB, ts []Target, o Options) Result {
	t.Helper()
	rs := Start(ts, o)
	if rs[0].Failed() || rs[0].State != Started {
		t.Fatalf("start: %s %v %+v", rs[0].State, rs[0].Err, rs[0].Dirs)
	}
	return rs[0]
}

// clean asserts only kernel-default qdiscs remain on the device and IFB.
func clean(t testing.TB, p *plan.Plan) {
	t.Helper()
	if _, extra := shape(t, &plan.Plan{Device: p.Device, IFB: p.IFB}); len(extra) > 0 {
		t.Errorf("after stop the kernel still holds %+v", extra)
	}
}

func TestLifecycle(t *testing.T) {
	for _, b := range []config.Backend{config.NSS, config.FQCodel} {
		t.Run(string(b), func(t *testing.T) {
			useShim(t, "")
			ns := tctest.NewNetns(t, "life")
			tg := target(b)
			ns.Do(t, func() {
				o := options(t, &tc.Runner{}, t.TempDir())
				if rs := Stop([]Target{tg}, o); rs[0].Failed() {
					t.Errorf("stop before any start: %v", rs[0].Err)
				}
				for round := range 2 { // the second start replaces the first
					r := mustStart(t, []Target{tg}, o)
					if missing, extra := shape(t, r.Plan); len(missing)+len(extra) > 0 {
						t.Errorf("round %d: missing %+v extra %+v", round, missing, extra)
					}
					st := Inspect([]Target{tg}, o)
					if st[0].Err != nil || !st[0].Matches() && b == config.NSS {
						t.Errorf("status: %v diffs %v", st[0].Err, st[0].Diffs)
					}
				}
				p, _ := plan.Build(tg.Queue, tg.Facts)
				for range 2 {
					if rs := Stop([]Target{tg}, o); rs[0].Failed() {
						t.Errorf("stop: %v", rs[0].Err)
					}
					clean(t, p)
				}
				_, err := exec.Command("ip", "link", "show", "dev", p.IFB).CombinedOutput()
				if kept := err == nil; kept != (b == config.NSS) {
					t.Errorf("IFB %s kept=%v after stop; want kept only on nss", p.IFB, kept)
				}
			})
		})
	}
}

func TestWarmStartProcesses(t *testing.T) {
	useShim(t, "")
	ns := tctest.NewNetns(t, "procs")
	tg := target(config.FQCodel)
	ns.Do(t, func() {
		r := &tc.Runner{}
		o := options(t, r, t.TempDir())
		mustStart(t, []Target{tg}, o)
		Stop([]Target{tg}, o) // deletes the IFB: the next start must raise it
		before := r.Procs()
		mustStart(t, []Target{tg}, o)
		if n := r.Procs() - before; n > 4 {
			t.Errorf("warm full start used %d processes, want <= 4", n)
		}
		before = r.Procs()
		mustStart(t, []Target{tg}, o)
		if n := r.Procs() - before; n > 3 {
			t.Errorf("warm start with the IFB up used %d processes, want <= 3", n)
		}
	})
}

// failAt is a fake tc that refuses tree line k of one direction's batch
// (the ingress batch is the one that touches ffff:), after applying the
// lines before it, as the real tc does. Teardown lines ("del") that ride in
// front of the egress batch are not counted as tree lines.
const failAt = `#!/bin/sh
case " $* " in *" -batch "*) ;; *) exec "$SHIM" "$@";; esac
in=$(cat)
skip=$(printf '%s\n' "$in" | grep -c '^[a-z]* del ')
# a -force batch without teardown is the probe's: let it through
case " $* " in *" -force "*) [ "$skip" -gt 0 ] || { printf '%s\n' "$in" | "$SHIM" "$@"; exit $?; };; esac
tree=$(printf '%s\n' "$in" | grep -v '^[a-z]* del ')
case "$tree" in *" add "*) ;; *) printf '%s\n' "$in" | "$SHIM" "$@"; exit $?;; esac
if printf '%s\n' "$tree" | grep -q 'ffff:'; then d=ingress; else d=egress; fi
[ "$d" = "$FAIL_DIR" ] || { printf '%s\n' "$in" | "$SHIM" "$@"; exit $?; }
# the teardown may fail harmlessly (-force goes on); a tree line may not
printf '%s\n' "$in" | head -n "$skip" | "$SHIM" -force -batch - 2>/dev/null
printf '%s\n' "$in" | head -n $((skip + FAIL_LINE - 1)) | tail -n +$((skip + 1)) | "$SHIM" -batch - || exit 1
echo "Error: injected failure." >&2
echo "Command failed -:$((skip + FAIL_LINE))" >&2
exit 1
`

func TestFailureLeavesDirectionClean(t *testing.T) {
	for _, b := range []config.Backend{config.NSS, config.FQCodel} {
		tg := target(b)
		p, err := plan.Build(tg.Queue, tg.Facts)
		if err != nil {
			t.Fatal(err)
		}
		for di, d := range p.Dirs {
			for k := 1; k <= len(d.TC); k++ {
				t.Run(fmt.Sprintf("%s/%s/line%d", b, d.Direction.Side(), k), func(t *testing.T) {
					useShim(t, failAt)
					t.Setenv("FAIL_DIR", d.Direction.Side())
					t.Setenv("FAIL_LINE", fmt.Sprint(k))
					ns := tctest.NewNetns(t, "fail")
					ns.Do(t, func() {
						rs := Start([]Target{tg}, options(t, &tc.Runner{}, t.TempDir()))
						r := rs[0]
						if r.State != Partial || r.Dirs[di].Err == nil || !strings.Contains(r.Dirs[di].Err.Error(), "injected") {
							t.Fatalf("want %s to fail at line %d, got %s %+v", d.Direction.Side(), k, r.State, r.Dirs)
						}
						for j, od := range r.Plan.Dirs {
							checkDir(t, r.Plan, od, j != di)
						}
					})
				})
			}
		}
	}
}

// noECN is a fake tc whose every line carrying the ecn keyword is refused,
// as a tc without the NSS patch refuses it for nssfq_codel.
const noECN = `#!/bin/sh
case " $* " in *" -batch "*) ;; *) exec "$SHIM" "$@";; esac
sed 's/^\(.*[[:space:]]ecn\([[:space:]].*\)\{0,1\}\)$/qdisc add dev lo root handle 1: no_ecn_here/' | "$SHIM" "$@"
`

func TestECNRefusedRetriesWithout(t *testing.T) {
	for _, probe := range []bool{true, false} {
		t.Run(fmt.Sprintf("probe=%v", probe), func(t *testing.T) {
			useShim(t, noECN)
			ns := tctest.NewNetns(t, "ecn")
			tg := target(config.NSS)
			ns.Do(t, func() {
				o := options(t, &tc.Runner{}, t.TempDir())
				if !probe {
					o.Prober = nil
				}
				r := mustStart(t, []Target{tg}, o)
				in := r.Dirs[1]
				if in.Direction != config.Download || len(in.Warnings) == 0 || !strings.Contains(in.Warnings[0], "ecn") {
					t.Errorf("want an ECN warning on ingress, got %+v", r.Dirs)
				}
				if r.Plan.Dirs[1].ECN {
					t.Error("ingress still planned with ECN")
				}
				for _, d := range r.Plan.Dirs {
					checkDir(t, r.Plan, d, true)
				}
			})
		})
	}
}

func TestWaitsForAddress(t *testing.T) {
	ns := tctest.NewNetns(t, "wait")
	tg := target(config.NSS)
	tg.Facts.Proto = "pppoe"
	ns.Do(t, func() {
		r := &tc.Runner{}
		rs := Start([]Target{tg}, Options{Kernel: System{Runner: r}})
		if rs[0].State != Waiting || rs[0].Failed() || r.Procs() != 0 {
			t.Errorf("pppoe without address: got %s %v after %d processes, want waiting and untouched", rs[0].State, rs[0].Err, r.Procs())
		}
		ns.Exec(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "wan")
		if rs = Start([]Target{tg}, Options{Kernel: System{Runner: r}}); rs[0].State == Waiting {
			t.Errorf("pppoe with an address still waits")
		}
	})
}

// A queue on the physical port (the NSS way: interface wan, network wan proto
// pppoe) waits for the address of pppoe-wan, not of the port.
func TestWaitsForProtocolDevice(t *testing.T) {
	ns := tctest.NewNetns(t, "waitl3")
	tg := target(config.NSS)
	tg.Facts.Proto, tg.Facts.NetworkSection = "pppoe", "wan"
	ns.Do(t, func() {
		r := &tc.Runner{}
		ns.Exec(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "wan")
		rs := Start([]Target{tg}, Options{Kernel: System{Runner: r}})
		if rs[0].State != Waiting || !strings.Contains(fmt.Sprint(rs[0].Err), "pppoe-wan") || r.Procs() != 0 {
			t.Fatalf("port addressed, no pppoe-wan: got %s %v after %d processes, want waiting for pppoe-wan", rs[0].State, rs[0].Err, r.Procs())
		}
		ns.Exec(t, "ip", "link", "add", "pppoe-wan", "type", "veth", "peer", "name", "pppoe-peer")
		ns.Exec(t, "ip", "link", "set", "pppoe-wan", "up")
		ns.Exec(t, "ip", "addr", "add", "198.51.100.1/32", "dev", "pppoe-wan")
		if rs = Start([]Target{tg}, Options{Kernel: System{Runner: r}}); rs[0].State == Waiting {
			t.Errorf("pppoe-wan has an address, start still waits: %v", rs[0].Err)
		}
	})
}

func TestHotplugGuard(t *testing.T) {
	useShim(t, "")
	ns := tctest.NewNetns(t, "hotplug")
	tg := target(config.NSS)
	ns.Do(t, func() {
		o := options(t, &tc.Runner{}, t.TempDir())
		mustStart(t, []Target{tg}, o)
		o.Hotplug = true
		if rs := Start([]Target{tg}, o); rs[0].State != Skipped || rs[0].Failed() {
			t.Errorf("hotplug start on a shaped IFB: got %s %v, want skipped", rs[0].State, rs[0].Err)
		}
	})
}

// failIFB is a fake ip that cannot create devices, like a kernel without ifb.
const failIFB = `#!/bin/sh
case " $* " in *" -batch "*) ;; *) exec /usr/sbin/ip "$@";; esac
in=$(cat)
case "$in" in *"link add"*) echo "Error: Unknown device type." >&2; echo "Command failed -:1" >&2; exit 1;; esac
printf '%s\n' "$in" | /usr/sbin/ip "$@"
`

// Without an IFB the ingress batch must not run at all: its redirect would
// send every download packet to a device that cannot pass it on.
func TestIFBFailureSkipsIngress(t *testing.T) {
	useShim(t, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ip"), []byte(failIFB), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	ns := tctest.NewNetns(t, "noifb")
	tg := target(config.FQCodel)
	ns.Do(t, func() {
		o := options(t, &tc.Runner{}, "")
		o.Prober = nil // the probe would refuse ingress itself; test the apply path
		r := Start([]Target{tg}, o)[0]
		if r.State != Partial || r.Dirs[0].Err != nil || r.Dirs[1].Err == nil {
			t.Fatalf("want egress shaped and ingress failed, got %s %+v", r.State, r.Dirs)
		}
		checkDir(t, r.Plan, r.Plan.Dirs[0], true)
		if s := kernel(t, r.Plan); s.IngressQdisc("wan") != nil || len(s.Redirects("wan")) > 0 {
			t.Errorf("ingress left behind: %s", ids(s))
		}
	})
}

func TestDryRunTouchesNothing(t *testing.T) {
	ns := tctest.NewNetns(t, "dry")
	tg := target(config.FQCodel)
	missing := tg
	missing.Queue.Interface = "eth9" // a router's device, absent here
	ns.Do(t, func() {
		var out strings.Builder
		r := &tc.Runner{}
		rs := Start([]Target{tg, missing}, Options{Kernel: System{Runner: r}, Prober: &tc.Prober{Runner: r}, DryRun: &out})
		Stop([]Target{tg}, Options{Kernel: System{Runner: r}, DryRun: &out})
		if r.Procs() != 0 {
			t.Errorf("dry run started %d processes", r.Procs())
		}
		for _, res := range rs {
			if res.State != DryRun {
				t.Errorf("%s: state %s, want dry-run (%v)", res.Device, res.State, res.Err)
			}
		}
		text := out.String()
		for _, want := range []string{"tc -force -batch - <<'EOF'\nqdisc del dev wan root\n", "ip -batch - <<'EOF'\nlink add name ifb4wan type ifb\n", "dev eth9 root handle 1:"} {
			if !strings.Contains(text, want) {
				t.Errorf("dry run output lacks %q:\n%s", want, text)
			}
		}
	})
}

// rootOf returns the handle of dev's non-default root qdisc ("" when none).
func rootOf(t testing.TB, dev string) string {
	t.Helper()
	s, err := (&tc.Runner{}).Read(dev)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Shaped(dev) {
		return ""
	}
	return s.Root(dev).Handle
}

// refuseWord is a fake tc that refuses every batch line holding $REFUSE,
// as tc refuses a misspelt option.
const refuseWord = `#!/bin/sh
case " $* " in *" -batch "*) ;; *) exec "$SHIM" "$@";; esac
sed "s/^.*$REFUSE.*\$/qdisc add dev lo root handle 1: refused_here/" | "$SHIM" "$@"
`

// A direction refused during validation keeps its previous state; when no
// direction passes, the kernel is not touched at all (docs/design.md, "Applying").
func TestRefusedDirectionUntouched(t *testing.T) {
	for _, c := range []struct {
		name    string
		shim    bool   // false: the host's own tc, whose kernel lacks fq_codel
		eopts   string // egress options
		refused []bool // per direction, egress first
	}{
		{"no fq_codel in kernel", false, "", []bool{true, true}},
		{"egress option typo", true, "bogus_key 1", []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.shim {
				useShim(t, refuseWord)
				t.Setenv("REFUSE", "bogus_key")
			}
			ns := tctest.NewNetns(t, "refuse")
			tg := target(config.FQCodel)
			tg.Queue.EQdiscOpts = c.eopts
			ns.Exec(t, "tc", "qdisc", "add", "dev", "wan", "root", "handle", "5:", "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms")
			ns.Exec(t, "tc", "qdisc", "add", "dev", "wan", "ingress")
			ns.Do(t, func() {
				res := Start([]Target{tg}, options(t, &tc.Runner{}, ""))[0]
				for j, want := range c.refused {
					d := res.Dirs[j]
					if !c.shim && d.Err == nil {
						t.Skip("this kernel has fq_codel")
					}
					if d.NotStarted != want || (d.Err != nil) != want {
						t.Errorf("%s: not started %v (%v), want %v", d.Direction.Side(), d.NotStarted, d.Err, want)
					}
				}
				if got := rootOf(t, "wan"); got != "5:" {
					t.Errorf("refused egress touched the previous root qdisc: now %q", got)
				}
				if !c.refused[1] {
					checkDir(t, res.Plan, res.Plan.Dirs[1], true)
					return
				}
				if s := kernel(t, res.Plan); s.IngressQdisc("wan") == nil || rootOf(t, "wan") != "5:" || res.State != Failed {
					t.Errorf("nothing passed validation (state %s), yet the kernel changed: %s", res.State, ids(s))
				}
			})
		})
	}
}

// A start with one rate at 0 removes what an earlier start built for that
// direction: sqm-scripts' start implies a stop.
func TestStartClearsUnshapedDirection(t *testing.T) {
	for _, zero := range []config.Direction{config.Upload, config.Download} {
		t.Run(zero.Side(), func(t *testing.T) {
			useShim(t, "")
			ns := tctest.NewNetns(t, "zero")
			tg := target(config.FQCodel)
			ns.Do(t, func() {
				o := options(t, &tc.Runner{}, t.TempDir())
				mustStart(t, []Target{tg}, o)
				tg.Queue.SetRate(zero, 0)
				r := mustStart(t, []Target{tg}, o)
				full, _ := plan.Build(target(config.FQCodel).Queue, tg.Facts)
				want := *r.Plan
				want.IFB = full.IFB // read the IFB even when the plan no longer uses it
				if missing, extra := shape(t, &want); len(missing)+len(extra) > 0 {
					t.Errorf("upload/download %d/%d: missing %+v, stale %+v", tg.Queue.Upload, tg.Queue.Download, missing, extra)
				}
			})
		})
	}
}

func TestAddressDevice(t *testing.T) {
	for _, c := range []struct {
		iface, proto, section, want string
	}{
		{"pppoe-wan", "pppoe", "wan", "pppoe-wan"},
		{"wan", "pppoe", "wan", "pppoe-wan"},
		{"wan.7", "pppoe", "wan", "pppoe-wan"},
		{"eth1", "dslite", "wan6", "ds-wan6"},
		{"ds-wan6", "dslite", "wan6", "ds-wan6"},
		{"eth1", "map", "wan", "map-wan"},
		{"ppp0", "pppoe", "", "ppp0"},
	} {
		q := config.Queue{Interface: c.iface}
		f := linkinfo.Facts{Proto: c.proto, NetworkSection: c.section}
		if got := addressDevice(q, f); got != c.want {
			t.Errorf("addressDevice(%s, proto %s, section %q) = %s, want %s", c.iface, c.proto, c.section, got, c.want)
		}
	}
}
