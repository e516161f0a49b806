package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/internal/tune"
)

const sqmConfig = `config queue 'wan'
	option enabled '1'
	option interface 'luci1a'
	option download '20000'
	option upload '%d'
	option qdisc 'fq_codel'
	option script 'nss-zk.qos'
	option autorate '1'
	option autorate_server '10.91.0.2'
`

// newRouter shapes a queue on one end of a veth pair, with sqmkit serve at
// the other, the built sqmkit and tc shim under a temp directory.
func newRouter(t *testing.T) *router {
	t.Helper()
	a, b := tctest.NewPair(t, "luci1", 91)
	r := &router{ns: a.Name, root: t.TempDir(), bin: t.TempDir(), server: b.Addr}
	// built in sqmkit's own module, as make builds them
	for pkg, out := range map[string]string{"./cmd/sqmkit": "sqmkit", "./internal/tc/tcshim": "tc"} {
		if o, err := exec.Command("go", "-C", "../..", "build", "-o", filepath.Join(r.bin, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, o)
		}
	}
	r.config(t, 10000)
	// the router's /sys is the namespace's, as on a router (autorate reads
	// its counters there)
	if err := os.Symlink("/sys", filepath.Join(r.root, "sys")); err != nil {
		t.Fatal(err)
	}
	r.sqmkit(t, "start", "--root", r.root)
	srv := exec.Command("ip", "netns", "exec", b.Name, filepath.Join(r.bin, "sqmkit"), "serve", "--listen", b.Addr+":8693")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	return r
}

// config writes the router's /etc/config/sqm with upload kbit/s.
func (r *router) config(t *testing.T, upload int) {
	t.Helper()
	os.MkdirAll(filepath.Join(r.root, "etc/config"), 0o755)
	if err := os.WriteFile(filepath.Join(r.root, "etc/config/sqm"), []byte(strings.Replace(sqmConfig, "%d", strconv.Itoa(upload), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// killJob ends a background job the pages started and waits for it to
// put the shaper back (tune restores its rates on SIGTERM).
func (r *router) killJob(name string) {
	b, err := os.ReadFile(filepath.Join(r.root, "var/run/sqmkit/luci", name, "lock"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
}

// browser starts headless Chromium; each tab is a context of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(p); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		tctest.Missing(t, "no Chromium (scripts/deps.sh installs Debian's chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	listen(ctx)
	return ctx
}

// console keeps what the pages logged and threw, for a failure's report.
var console struct {
	sync.Mutex
	lines []string
}

// listen records a tab's console messages and uncaught exceptions.
func listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		var line string
		switch ev := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			for _, a := range ev.Args {
				line += " " + string(a.Value) + a.Description
			}
			line = string(ev.Type) + ":" + line
		case *cdpruntime.EventExceptionThrown:
			line = "exception: " + ev.ExceptionDetails.Error()
		default:
			return
		}
		console.Lock()
		console.lines = append(console.lines, line)
		console.Unlock()
	})
}

// tab opens a second page in the same browser, as a second user would.
func tab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	c, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	listen(c)
	return c
}

// run runs browser actions with a deadline and fails the test on an error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		var page string
		chromedp.Run(ctx, chromedp.OuterHTML("body", &page, chromedp.ByQuery))
		console.Lock()
		defer console.Unlock()
		t.Fatalf("%s: %v\n%s\nconsole:\n%s", what, err, page, strings.Join(console.lines, "\n"))
	}
}

// waitText waits until the element sel's text holds want.
func waitText(sel, want string) chromedp.Action {
	return chromedp.Poll(`(function() { var e = document.querySelector(`+strconv.Quote(sel)+`); return !!e && e.textContent.indexOf(`+strconv.Quote(want)+`) >= 0; })()`, nil, chromedp.WithPollingInterval(200*time.Millisecond))
}

// runtimeDir is LuCI's runtime the pages run on: the stand-in, or LuCI's
// own luci-base files when SQMKIT_LUCI_REAL names their directory.
func runtimeDir() string {
	if d := os.Getenv("SQMKIT_LUCI_REAL"); d != "" {
		return d
	}
	return "luci"
}

// TestPages: what a user sees on each page of luci-app-sqmkit, served by
// the real plugin on a shaped queue: status with a doctor finding and live
// counters, a test result's chart and a running test seen from a second
// tab, a tune's outcome with Write and Undo and a running tune's progress,
// and autorate's rates and delay.
func TestPages(t *testing.T) {
	r := newRouter(t)
	ctx := browser(t)
	base := serve(t, r, runtimeDir(), "../../internal/openwrt/files/luci")
	t.Run("status", func(t *testing.T) { statusPage(t, ctx, r, base) })
	t.Run("test", func(t *testing.T) { testPage(t, ctx, r, base) })
	t.Run("tune", func(t *testing.T) { tunePage(t, ctx, r, base) })
	t.Run("autorate", func(t *testing.T) { autoratePage(t, ctx, r, base) })
}

// statusPage: a config changed since the start shows as not planned, the
// doctor's mismatch finding with its fix, and the live counters fill in.
func statusPage(t *testing.T, ctx context.Context, r *router, base string) {
	r.config(t, 12000)
	defer r.config(t, 10000)
	ping := r.cmd("ping", "-q", "-i", "0.05", r.server)
	ping.Start()
	defer func() { ping.Process.Kill(); ping.Wait() }()
	var verdict, fix string
	run(t, ctx, "status page", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/status"),
		chromedp.WaitVisible(".sqmkit-verdict", chromedp.ByQuery),
		chromedp.Text(".sqmkit-verdict", &verdict, chromedp.ByQuery),
		chromedp.WaitVisible(`tr.sqmkit-finding[data-id="mismatch"]`, chromedp.ByQuery),
		chromedp.Text(`tr.sqmkit-finding[data-id="mismatch"]`, &fix, chromedp.ByQuery),
		waitText(".sqmkit-live", "bit/s"))
	if !strings.Contains(verdict, "Not as planned") || !strings.Contains(verdict, "luci1a") {
		t.Errorf("verdict %q", verdict)
	}
	if !strings.Contains(fix, "warn") || !strings.Contains(fix, "Re-apply the config") {
		t.Errorf("the mismatch finding shows %q", fix)
	}
}

// testPage: a kept result shows its grade and phases and draws its chart;
// a test started from the page shows its progress, and a second tab sees
// it running with Start disabled.
func testPage(t *testing.T, ctx context.Context, r *router, base string) {
	res := bbresult.Result{Server: "vps.example", Started: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Grades: bbresult.Grades{DSLReports: "A+"},
		Phases: []bbresult.Phase{{Name: "idle_before", End: 2}, {Name: "download", Start: 2, End: 12, AddedMedian: 1.2, AddedP95: 3.4, DownloadMbps: 18.2, Grade: "A+"}}}
	for i := range 1200 {
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: float64(i) / 100, RTT: 20 + float64(i%9)})
	}
	for i := range 120 {
		res.Samples.Throughput = append(res.Samples.Throughput, bbresult.Throughput{T: float64(i) / 10, Download: 18})
	}
	writeJSON(t, filepath.Join(r.root, "var/run/sqmkit/luci/test/results/20261129-120000.json"), res)
	var result string
	var paths int
	run(t, ctx, "test page", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/test"),
		chromedp.WaitVisible(".sqmkit-result", chromedp.ByQuery),
		chromedp.Text(".sqmkit-result", &result, chromedp.ByQuery),
		chromedp.WaitVisible("#sqmkit-chart svg path.sqmkit-series", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#sqmkit-chart path.sqmkit-series')).filter(function(p) { return p.getAttribute('d').length > 100; }).length`, &paths))
	if !strings.Contains(result, "grade A+") || !strings.Contains(result, "+1.2 / +3.4 ms") {
		t.Errorf("result shows %q", result)
	}
	if paths != 3 {
		t.Errorf("%d drawn series, want round trip, download and upload", paths)
	}
	// no server configured yet: the plugin's {error} answer is shown
	run(t, ctx, "start without a server", chromedp.Click("#sqmkit-test-start", chromedp.ByQuery),
		waitText(".alert-message.danger", "server: name the sqmkit serve to test against"))
	defer r.killJob("test")
	run(t, ctx, "start a test", chromedp.SetValue("#sqmkit-server", r.server, chromedp.ByQuery), chromedp.Click("#sqmkit-test-start", chromedp.ByQuery),
		waitText("#sqmkit-test-running", "A test runs against "+r.server), waitText("#sqmkit-test-log", "Mbit/s"))
	second := tab(t, ctx)
	var disabled bool
	run(t, second, "a second tab", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/test"),
		waitText("#sqmkit-test-running", "A test runs against"),
		chromedp.Evaluate(`document.getElementById('sqmkit-test-start').disabled`, &disabled))
	if !disabled {
		t.Error("a second tab may start a second test")
	}
}

// tunePage: a finished tune's rates beside the configured ones, Write puts
// them in the config, Undo takes them back; a tune started from the page
// shows its steps, in a second tab too.
func tunePage(t *testing.T, ctx context.Context, r *router, base string) {
	dir := filepath.Join(r.root, "var/run/sqmkit/luci/tune")
	out := filepath.Join(dir, "out.json")
	writeJSON(t, filepath.Join(dir, "meta.json"), map[string]any{"started": time.Now().UTC(), "server": r.server, "section": "wan", "target": "A+", "budget_s": 180, "out": out})
	writeJSON(t, out, tune.Outcome{Search: &search.Result{Download: search.Choice{RateKbit: 18500, Why: "the highest rate meeting A+"}, Upload: search.Choice{RateKbit: 9200}},
		Confirm: &bbresult.Result{Grades: bbresult.Grades{DSLReports: "A+"}}, Spent: 150 * time.Second})
	var found string
	run(t, ctx, "tune page", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/tune"),
		chromedp.WaitVisible("#sqmkit-outcome", chromedp.ByQuery), chromedp.Text("#sqmkit-outcome", &found, chromedp.ByQuery),
		chromedp.WaitVisible("#sqmkit-tune-write", chromedp.ByQuery), chromedp.Click("#sqmkit-tune-write", chromedp.ByQuery),
		waitText("#maincontent", "Written: download 18500, upload 9200 kbit/s (were 20000/10000)"))
	if !strings.Contains(found, "18500 kbit/s") || !strings.Contains(found, "20000 kbit/s") || !strings.Contains(found, "grade A+") {
		t.Errorf("outcome shows %q", found)
	}
	if got := rates(t, r); got != (config.Rates{Download: 18500, Upload: 9200}) {
		t.Errorf("after Write the config holds %+v", got)
	}
	run(t, ctx, "undo", chromedp.WaitVisible("#sqmkit-tune-undo", chromedp.ByQuery), chromedp.Click("#sqmkit-tune-undo", chromedp.ByQuery),
		waitText("#maincontent", "Restored: download 20000, upload 10000 kbit/s"))
	if got := rates(t, r); got != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Errorf("after Undo the config holds %+v", got)
	}
	defer r.killJob("tune")
	run(t, ctx, "start a tune", chromedp.SetValue("#sqmkit-server", r.server, chromedp.ByQuery), chromedp.Click("#sqmkit-tune-start", chromedp.ByQuery),
		waitText("#sqmkit-tune-running", "Tuning wan against "+r.server), waitText("#sqmkit-tune-progress", "measuring the line"))
	run(t, tab(t, ctx), "a second tab", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/tune"),
		waitText("#sqmkit-tune-running", "Tuning wan"), waitText("#sqmkit-tune-progress", "measuring the line"))
}

// autoratePage: a running autorate's rates within its bounds and its
// minutes of rates and delay as two charts.
func autoratePage(t *testing.T, ctx context.Context, r *router, base string) {
	d := r.cmd(filepath.Join(r.bin, "sqmkit"), "autorate", "--root", r.root, "wan")
	var log bytes.Buffer
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		if t.Failed() {
			t.Logf("autorate:\n%s", log.String())
		}
	}()
	status := filepath.Join(r.root, "var/run/sqmkit/autorate/wan.json")
	for end := time.Now().Add(20 * time.Second); !fileExists(status) && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
	}
	var rates string
	var charts int
	run(t, ctx, "autorate page", chromedp.Navigate(base+"/cgi-bin/luci/admin/network/sqmkit/autorate"),
		chromedp.WaitVisible(".sqmkit-rates", chromedp.ByQuery), chromedp.Text(".sqmkit-rates", &rates, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('.sqmkit-autorate svg.sqmkit-chart').length`, &charts))
	if !strings.HasPrefix(rates, "Running.") || !strings.Contains(rates, "floor 4000, ceiling 40000") {
		t.Errorf("rates show %q", rates)
	}
	if charts != 2 {
		t.Errorf("%d charts, want rates and delay", charts)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rates are the queue's rates in the router's SQM config.
func rates(t *testing.T, r *router) config.Rates {
	t.Helper()
	qs, err := config.Resolve(r.root, "", nil, "wan")
	if err != nil {
		t.Fatal(err)
	}
	return config.Rates{Download: qs[0].Download, Upload: qs[0].Upload}
}
