package browser

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
)

// pages are luci-app-sqmkit's views.
var pages = []string{"status", "test", "tune", "autorate"}

// TestPagesAsRoot: what an admin sees and does on each page, on real LuCI,
// rpcd and uhttpd: status shaped as planned with live counters and the
// doctor, a test from the page with its grade and chart (a second window
// sees it run), a tune's rates written and undone after a confirmation
// (the config and the running shaper change), a tune stopped halfway that
// reads as stopped, and autorate switched on with its bounds from the
// page, whose chart then moves.
func TestPagesAsRoot(t *testing.T) {
	r := newRouter(t, nil)
	ctx := browser(t)
	r.login(t, ctx, "root", rootPass)
	_, mark := consoleErrors(0)
	t.Run("status", func(t *testing.T) { statusPage(t, ctx, r) })
	t.Run("test", func(t *testing.T) { testPage(t, ctx, r) })
	t.Run("tune", func(t *testing.T) { tunePage(t, ctx, r) })
	t.Run("autorate", func(t *testing.T) { autoratePage(t, ctx, r) })
	if errs, _ := consoleErrors(mark); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

func statusPage(t *testing.T, ctx context.Context, r *router) {
	ping := r.Command(nil, "ping", "-q", "-i", "0.2", r.server)
	ping.Start()
	defer func() { ping.Process.Kill(); ping.Wait() }()
	var verdict string
	var fails int
	run(t, ctx, "status page", r.page("status"),
		chromedp.WaitVisible(".sqmkit-verdict", chromedp.ByQuery), textOf(".sqmkit-verdict", &verdict),
		chromedp.WaitVisible("#sqmkit-doctor", chromedp.ByQuery), waitText(".sqmkit-live", "bit/s"),
		chromedp.Evaluate(`document.querySelectorAll('tr.sqmkit-finding[data-severity="fail"]').length`, &fails))
	if !strings.Contains(verdict, "Shaped as planned") || !strings.Contains(verdict, "wan on wan, backend nss") {
		t.Errorf("verdict %q", verdict)
	}
	if fails != 0 {
		var doc string
		chromedp.Run(ctx, textOf("#sqmkit-doctor", &doc))
		t.Errorf("the doctor has %d failing findings:\n%s", fails, doc)
	}
}

func testPage(t *testing.T, ctx context.Context, r *router) {
	// the first hour: no server typed, the queue's test_server (a
	// responsiveness server over HTTPS, its certificate checked against the
	// router's CA bundle) is the default the page names and the test uses
	def := "https://" + r.server + "/config"
	var placeholder string
	run(t, ctx, "start a test", r.page("test"), chromedp.WaitVisible("#sqmkit-server-default", chromedp.ByQuery),
		chromedp.AttributeValue("#sqmkit-server", "placeholder", &placeholder, nil, chromedp.ByQuery),
		chromedp.Click("#sqmkit-test-start", chromedp.ByQuery), waitText("#sqmkit-test-running", "A test runs against "+def))
	if placeholder != def {
		t.Errorf("server placeholder %q, want the queue's test_server %s", placeholder, def)
	}
	var disabled bool
	inTab(t, ctx, "a second window", r.page("test"), waitText("#sqmkit-test-running", "A test runs against"),
		chromedp.Evaluate(`document.getElementById('sqmkit-test-start').disabled`, &disabled))
	if !disabled {
		t.Error("a second window may start a second test")
	}
	var grade, notes string
	var series int
	runFor(t, ctx, 3*time.Minute, "the test's result", chromedp.WaitVisible(".sqmkit-result .sqmkit-grade-letter", chromedp.ByQuery),
		textOf(".sqmkit-result .sqmkit-grade-letter", &grade),
		textOf(".sqmkit-result .sqmkit-notes", &notes),
		chromedp.WaitVisible("#sqmkit-chart svg path.sqmkit-series", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#sqmkit-chart path.sqmkit-series')).filter(function(p) { return p.getAttribute('d').length > 100; }).length`, &series))
	if len(grade) == 0 || !strings.Contains("A+ A B C D F", grade) {
		t.Errorf("grade %q", grade)
	}
	if series != 3 {
		t.Errorf("%d drawn series, want round trip, download and upload", series)
	}
	if !strings.Contains(notes, "over HTTP/1.1") || !strings.Contains(notes, "no SERVER given: measured against "+def) {
		t.Errorf("the result's notes do not say which server and protocol:\n%s", notes)
	}
}

func tunePage(t *testing.T, ctx context.Context, r *router) {
	// a finished tune's outcome, written where the plugin keeps it
	dir := r.Path("/var/run/sqmkit/luci/tune")
	out := "/var/run/sqmkit/luci/tune/out.json"
	writeJSON(t, filepath.Join(dir, "meta.json"), map[string]any{"started": time.Now().UTC(), "server": r.server, "section": "wan", "target": "A+", "budget_s": 180, "out": out})
	writeJSON(t, r.Path(out), tune.Outcome{Search: &search.Result{Download: search.Choice{RateKbit: 18500, Why: "the highest rate meeting A+"}, Upload: search.Choice{RateKbit: 9200}},
		Confirm: &bbresult.Result{Grades: bbresult.Grades{DSLReports: "A+"}}, Spent: 150 * time.Second})
	var found, limits string
	run(t, ctx, "tune page", r.page("tune"),
		chromedp.WaitVisible("#sqmkit-outcome", chromedp.ByQuery), textOf("#sqmkit-outcome", &found),
		textOf("#sqmkit-budget-limits", &limits),
		chromedp.Click("#sqmkit-tune-write", chromedp.ByQuery), chromedp.WaitVisible("#sqmkit-confirm", chromedp.ByQuery))
	if !strings.Contains(found, "18500 kbit/s") || !strings.Contains(found, "20000 kbit/s") || !strings.Contains(found, "grade A+") {
		t.Errorf("outcome shows %q", found)
	}
	// a poll (every 2 s) leaves an unchanged outcome as it is: the node a
	// reader selects from is still there
	var kept bool
	run(t, ctx, "the outcome across polls", chromedp.Evaluate(`document.getElementById('sqmkit-outcome').sqmkitMark = 1`, nil),
		chromedp.Sleep(5*time.Second), chromedp.Evaluate(`document.getElementById('sqmkit-outcome').sqmkitMark === 1`, &kept))
	if !kept {
		t.Error("a poll built the unchanged outcome again")
	}
	if want := "140 to 3600 s"; limits != want {
		t.Errorf("the budget's bounds read %q, want the command's %q", limits, want)
	}
	if got := r.rates(t); got != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Fatalf("written before the confirmation: %+v", got)
	}
	run(t, ctx, "confirm the write", chromedp.Click("#sqmkit-confirm", chromedp.ByQuery),
		waitText("#maincontent", "Written: download 18500, upload 9200 kbit/s (were 20000/10000)"))
	if got := r.rates(t); got != (config.Rates{Download: 18500, Upload: 9200}) {
		t.Errorf("after Write the config holds %+v", got)
	}
	if live := r.liveRate(t, "ifb@wan"); live != "18500Kbit" && live != "18500kbit" && live != "18.5Mbit" {
		t.Errorf("after Write the running download shaper is at %q", live)
	}
	run(t, ctx, "undo", chromedp.WaitVisible("#sqmkit-tune-undo", chromedp.ByQuery), chromedp.Click("#sqmkit-tune-undo", chromedp.ByQuery),
		chromedp.WaitVisible("#sqmkit-confirm", chromedp.ByQuery), chromedp.Click("#sqmkit-confirm", chromedp.ByQuery),
		waitText("#maincontent", "Restored: download 20000, upload 10000 kbit/s"))
	if got := r.rates(t); got != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Errorf("after Undo the config holds %+v", got)
	}
	// a tune from the page, stopped halfway: its steps show while it runs
	// (in a second window too), then it reads as ended without rates
	run(t, ctx, "start a tune", chromedp.SetValue("#sqmkit-server", r.server, chromedp.ByQuery), chromedp.SetValue("#sqmkit-budget", "140", chromedp.ByQuery),
		chromedp.Click("#sqmkit-tune-start", chromedp.ByQuery),
		waitText("#sqmkit-tune-running", "Tuning wan against "+r.server), waitText("#sqmkit-tune-progress", "measuring the line"))
	inTab(t, ctx, "a second window", r.page("tune"), waitText("#sqmkit-tune-running", "Tuning wan"), waitText("#sqmkit-tune-progress", "measuring the line"))
	r.stopJob(t, "tune")
	run(t, ctx, "the stopped tune", waitText("#sqmkit-outcome .sqmkit-tune-error", ""), waitText("#sqmkit-outcome h3", "ended without rates to keep"))
	var text string
	chromedp.Run(ctx, textOf("#sqmkit-outcome", &text))
	if strings.Contains(text, "Found") || strings.Contains(text, "0 kbit/s") && !strings.Contains(text, "20000") {
		t.Errorf("a stopped tune reads %q", text)
	}
	if got := r.rates(t); got != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Errorf("after the stopped tune the config holds %+v", got)
	}
	// a tune killed outright (kill -9, the OOM killer) with the shaper
	// open: the next page load puts the rates back and says so
	run(t, ctx, "start a tune to kill", r.page("tune"), chromedp.SetValue("#sqmkit-server", r.server, chromedp.ByQuery),
		chromedp.SetValue("#sqmkit-budget", "140", chromedp.ByQuery), chromedp.Click("#sqmkit-tune-start", chromedp.ByQuery),
		waitText("#sqmkit-tune-running", "Tuning wan"))
	for end := time.Now().Add(30 * time.Second); r.liveRate(t, "ifb@wan") == "20Mbit" && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
	}
	if live := r.liveRate(t, "ifb@wan"); live == "20Mbit" {
		r.stopJob(t, "tune")
		t.Fatalf("the tune did not open the shaper (download at %s)", live)
	}
	r.stopJobWith(t, "tune", "-KILL")
	run(t, ctx, "the status page after the kill", r.page("status"), waitText(".alert-message", "ended without putting its rates back"))
	if live := r.liveRate(t, "ifb@wan"); live != "20Mbit" {
		t.Errorf("after the killed tune the download shaper runs at %s, want 20Mbit", live)
	}
}

func autoratePage(t *testing.T, ctx context.Context, r *router) {
	// on from the page: the flag, a server, Save & Apply; procd's trigger
	// reloads sqmkit's service, which starts the queue's autorate
	run(t, ctx, "switch autorate on", r.page("autorate"),
		chromedp.WaitVisible(`[id="cbid.sqm.wan.autorate"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.Click(`[id="cbid.sqm.wan.autorate"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[id="widget.cbid.sqm.wan.autorate_server"]`, chromedp.ByQuery),
		chromedp.SendKeys(`[id="widget.cbid.sqm.wan.autorate_server"]`, r.server, chromedp.ByQuery),
		chromedp.SendKeys(`[id="widget.cbid.sqm.wan.autorate_max_download"]`, "40000", chromedp.ByQuery),
		chromedp.Click(`.cbi-page-actions .cbi-button-apply li[data-value="0"]`, chromedp.ByQuery),
		// LuCI confirms the apply, then loads the page again
		waitText("body", "Configuration changes applied."), chromedp.Sleep(3*time.Second))
	b, _ := waitFile(t, r.Path("/etc/config/sqm"), "option autorate '1'")
	if !strings.Contains(b, "option autorate_server '"+r.server+"'") || !strings.Contains(b, "option autorate_max_download '40000'") {
		t.Errorf("the page wrote:\n%s", b)
	}
	var rates string
	var charts int
	runFor(t, ctx, 90*time.Second, "autorate's status on the page", waitText(".sqmkit-rates", "Running."),
		textOf(".sqmkit-rates", &rates),
		chromedp.Evaluate(`document.querySelectorAll('.sqmkit-autorate svg.sqmkit-chart').length`, &charts))
	if !strings.Contains(rates, "ceiling 40000") {
		t.Errorf("rates show %q", rates)
	}
	if charts != 2 {
		t.Errorf("%d charts, want rates and delay", charts)
	}
	// the chart moves: more points a few polls later
	points := func() int {
		var n int
		chromedp.Run(ctx, chromedp.Evaluate(`(document.querySelector('.sqmkit-autorate svg.sqmkit-chart path.sqmkit-series').getAttribute('d').match(/L/g) || []).length`, &n))
		return n
	}
	first := points()
	time.Sleep(12 * time.Second)
	if next := points(); next <= first {
		t.Errorf("autorate's chart did not move: %d points, then %d", first, next)
	}
}

// TestReadOnlyLogin: a login that may only read sees every page with no
// live write button and no console error, and a call rpcd refuses shows a
// message, not an uncaught error.
func TestReadOnlyLogin(t *testing.T) {
	r := newRouter(t, nil)
	ctx := browser(t)
	r.login(t, ctx, viewer, viewerPass)
	_, mark := consoleErrors(0)
	for _, p := range pages {
		var live int
		run(t, ctx, p, r.page(p), chromedp.Sleep(time.Second),
			chromedp.Evaluate(`Array.from(document.querySelectorAll('#view button, #view input, #view select')).filter(function(b) {
				return !b.disabled && b.offsetParent !== null && !/Chart/.test(b.textContent); }).length`, &live))
		if live != 0 {
			var html string
			chromedp.Run(ctx, chromedp.OuterHTML("#view", &html, chromedp.ByQuery))
			t.Errorf("%s: %d live controls for a read-only login:\n%s", p, live, html)
		}
	}
	// a start forced past the disabled button: rpcd refuses, the page says so
	run(t, ctx, "a refused call", r.page("test"),
		chromedp.Evaluate(`(function() { var b = document.getElementById('sqmkit-test-start'); b.disabled = false; document.getElementById('sqmkit-server').disabled = false;
			document.getElementById('sqmkit-server').value = '10.91.0.2'; b.click(); })()`, nil),
		waitText(".alert-message", "may view these pages but not change anything"))
	if errs, _ := consoleErrors(mark); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	if _, ok := joblock.Held(r.Path("/var/run/sqmkit/luci/test"), "job"); ok {
		t.Error("the refused call started a test")
	}
}

// planted is markup put into every field the plugin hands the pages; it
// must arrive as text. Device names cannot hold a slash or a space, so
// the device is the short one.
const (
	planted       = `<img src="x" onerror="window.__planted=1"><u>planted</u>`
	plantedDevice = `<u>p`
)

// TestPlantedMarkup: markup in the state the plugin reads (results, a job's
// server and log lines, a tune's error, autorate's status), in the config
// (an interface) and in a device's name (the status, the doctor) and in an
// error the plugin returns never becomes an element in real LuCI, for root
// and for the read-only login.
func TestPlantedMarkup(t *testing.T) {
	r := newRouter(t, func(root string) error {
		q := "\nconfig queue 'other'\n\toption enabled '1'\n\toption interface '" + planted + "'\n\toption download '20000'\n\toption upload '10000'\n\toption script 'sqmkit-nss.qos'\n" +
			"\nconfig queue 'dev'\n\toption enabled '1'\n\toption interface '" + plantedDevice + "'\n\toption download '20000'\n\toption upload '10000'\n\toption script 'sqmkit-nss.qos'\n\toption autorate '1'\n"
		f, err := os.OpenFile(filepath.Join(root, "etc/config/sqm"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(q)
		return err
	})
	if err := ip([]string{"-n", r.Netns, "link", "add", plantedDevice, "type", "veth", "peer", "name", "up0"},
		[]string{"-n", r.Netns, "link", "set", plantedDevice, "up"}, []string{"-n", r.Netns, "link", "set", "up0", "up"}); err != nil {
		t.Fatal(err)
	}
	r.Exec("/etc/init.d/sqm", "restart")
	r.plant(t)
	for _, login := range [][2]string{{"root", rootPass}, {viewer, viewerPass}} {
		t.Run(login[0], func(t *testing.T) {
			ctx := browser(t)
			r.login(t, ctx, login[0], login[1])
			for _, p := range pages {
				run(t, ctx, p, r.page(p), chromedp.Sleep(3*time.Second))
				checkPlanted(t, ctx, p)
			}
			if login[0] == "root" {
				run(t, ctx, "an error with markup", r.page("tune"), chromedp.SetValue("#sqmkit-server", planted, chromedp.ByQuery),
					chromedp.Click("#sqmkit-tune-start", chromedp.ByQuery), waitText(".alert-message", "neither an IP address nor a host name"))
				checkPlanted(t, ctx, "tune's error")
			}
		})
	}
}

// plant writes markup into the job state the plugin reads: a kept result,
// a test that runs (its lock held here), a tune that ended with an error,
// and autorate's status for the queue on the planted device.
func (r *router) plant(t *testing.T) {
	base := "/var/run/sqmkit/luci/"
	res := bbresult.Result{Server: planted, Started: time.Now().UTC(), Grades: bbresult.Grades{DSLReports: planted}, Incomplete: planted,
		Notes: []string{planted}, Phases: []bbresult.Phase{{Name: planted, Start: 1, End: 3, Grade: planted}}}
	res.Samples.Probes = []bbresult.Probe{{T: 1, RTT: 10}, {T: 2, RTT: 12}}
	writeJSON(t, r.Path(base+"test/results/20261201-120000.json"), res)
	writeJSON(t, r.Path(base+"test/meta.json"), map[string]any{"started": time.Now().UTC(), "server": planted, "out": base + "test/results/x.json"})
	os.WriteFile(r.Path(base+"test/log"), []byte("sqmkit test: "+planted+"\n"), 0o644)
	l, err := joblock.Take(r.Path(base+"test"), "job", joblock.Holder{Kind: "test", PID: os.Getpid(), Started: time.Now(), What: planted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	writeJSON(t, r.Path(base+"tune/meta.json"), map[string]any{"started": time.Now().UTC(), "server": planted, "section": "wan", "out": base + "tune/out.json"})
	writeJSON(t, r.Path(base+"tune/out.json"), map[string]any{"error": planted})
	os.WriteFile(r.Path(base+"tune/log"), []byte(planted+"\n"), 0o644)
	now := time.Now().UTC()
	writeJSON(t, r.Path("/var/run/sqmkit/autorate/dev.json"), map[string]any{"at": now, "Rate": []int{1, 2}, "State": []string{planted, planted},
		"Min": []int{1, 1}, "Max": []int{2, 2}, "history": []map[string]any{{"t": 1, "rate": []int{1, 2}, "load": []int{1, 1}, "added_ms": map[string]float64{planted: 1}}}})
}

// checkPlanted fails if planted markup became an element or ran.
func checkPlanted(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	var elems int
	var ran bool
	chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('u, img[src="x"]').length`, &elems),
		chromedp.Evaluate(`!!window.__planted`, &ran))
	if elems != 0 || ran {
		var html string
		chromedp.Run(ctx, chromedp.OuterHTML("#maincontent", &html, chromedp.ByQuery))
		t.Errorf("%s: planted markup became %d elements (ran: %v):\n%s", where, elems, ran, html)
	}
}

// TestPhoneWidth: at a phone's 390 px every cell of the pages' tables
// names its column (data-title), as the bootstrap theme stacks them.
func TestPhoneWidth(t *testing.T) {
	r := newRouter(t, nil)
	ctx := browser(t)
	r.login(t, ctx, "root", rootPass)
	writeJSON(t, r.Path("/var/run/sqmkit/luci/test/results/20261201-120000.json"), bbresult.Result{Server: r.server, Started: time.Now().UTC(),
		Phases: []bbresult.Phase{{Name: "download", Start: 1, End: 3}}})
	for _, p := range pages {
		var untitled, cells int
		run(t, ctx, p, emulation.SetDeviceMetricsOverride(390, 844, 3, true), r.page(p), chromedp.Sleep(2*time.Second),
			chromedp.Evaluate(`document.querySelectorAll('#view table td').length`, &cells),
			chromedp.Evaluate(`document.querySelectorAll('#view table td:not([data-title])').length`, &untitled))
		if untitled != 0 {
			t.Errorf("%s: %d of %d cells have no data-title", p, untitled, cells)
		}
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

// waitFile waits until path holds want.
func waitFile(t *testing.T, path, want string) (string, bool) {
	t.Helper()
	var b []byte
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		b, _ = os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return string(b), true
		}
	}
	t.Errorf("%s never held %q:\n%s", path, want, b)
	return string(b), false
}

// rates are the queue's rates in the router's SQM config.
func (r *router) rates(t *testing.T) config.Rates {
	t.Helper()
	qs, err := config.Resolve(r.Path("/"), "", nil, "wan")
	if err != nil {
		t.Fatal(err)
	}
	return config.Rates{Download: qs[0].Download, Upload: qs[0].Upload}
}

// liveRate is the rate of dev's root qdisc as tc prints it.
func (r *router) liveRate(t *testing.T, dev string) string {
	t.Helper()
	out, _ := r.Exec("/sbin/tc", "qdisc", "show", "dev", dev, "root")
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "rate" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// stopJob ends a page's background job as a kill would, and waits until
// it is gone.
func (r *router) stopJob(t *testing.T, name string) { t.Helper(); r.stopJobWith(t, name, "-TERM") }

// stopJobWith ends a page's background job with signal sig and waits
// until it is gone.
func (r *router) stopJobWith(t *testing.T, name, sig string) {
	t.Helper()
	dir := r.Path("/var/run/sqmkit/luci/" + name)
	h, ok := joblock.Held(dir, "job")
	if !ok {
		t.Fatalf("no %s runs", name)
	}
	// the holder's pid is the router's: signal it from inside
	r.Exec("kill", sig, strconv.Itoa(h.PID))
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, ok := joblock.Held(dir, "job"); !ok {
			return
		}
	}
	t.Fatalf("the %s did not end", name)
}
