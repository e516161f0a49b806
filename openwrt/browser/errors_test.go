package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
)

// TestBrokenConfigPages: with an /etc/config/sqm that does not parse,
// every page loads (none spins), shows one banner naming the file's line
// however many polls bring the error back, and never reads as "no enabled
// queue" or offers a default server in the config's place.
func TestBrokenConfigPages(t *testing.T) {
	r := newRouter(t, nil)
	os.WriteFile(r.Path("/etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1\n"), 0o644)
	ctx := browser(t)
	r.login(t, ctx, "root", rootPass)
	_, mark := consoleErrors(0)
	for _, p := range pages {
		var banners, named, none int
		var placeholder string
		run(t, ctx, p, r.page(p), chromedp.Sleep(7*time.Second),
			chromedp.Evaluate(`document.querySelectorAll('.alert-message.danger').length`, &banners),
			chromedp.Evaluate(`Array.from(document.querySelectorAll('.alert-message')).filter(function(a) { return a.textContent.indexOf('etc/config/sqm:2') >= 0; }).length`, &named),
			chromedp.Evaluate(`document.querySelectorAll('.sqmkit-none').length`, &none),
			chromedp.Evaluate(`(function() { var s = document.getElementById('sqmkit-server'); return s ? s.placeholder : ''; })()`, &placeholder))
		if banners != 1 || named != 1 || none != 0 || placeholder != "" {
			var body string
			chromedp.Run(ctx, textOf("#maincontent", &body))
			t.Errorf("%s: %d banners, %d naming the line (want 1 and 1), %d 'no enabled queue', server placeholder %q:\n%s", p, banners, named, none, placeholder, body)
		}
	}
	if errs, _ := consoleErrors(mark); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestRefusedSection: a queue refused for its own mistake shows its error
// on the status page, not an empty plan ("on , backend , download 0").
func TestRefusedSection(t *testing.T) {
	r := newRouter(t, nil)
	f, _ := os.OpenFile(r.Path("/etc/config/sqm"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\nconfig queue 'xa'\n\toption enabled '1'\n\toption interface 'lan'\n\toption download 'fast'\n\toption upload '10000'\n")
	f.Close()
	ctx := browser(t)
	r.login(t, ctx, "root", rootPass)
	var text string
	run(t, ctx, "status", r.page("status"), chromedp.WaitVisible(`.sqmkit-refused[data-section="xa"]`, chromedp.ByQuery),
		textOf(`.sqmkit-refused[data-section="xa"]`, &text))
	if !strings.Contains(text, "Refused") || !strings.Contains(text, "download") || strings.Contains(text, "backend ,") {
		t.Errorf("the refused section reads %q", text)
	}
}

// TestChartsOnAPhone: at a phone's 390 px the test page's charts keep their
// text at 11 px or more on screen, no legend entry covers a phase's name,
// and a result that kept no samples says so instead of throwing.
func TestChartsOnAPhone(t *testing.T) {
	r := newRouter(t, nil)
	res := bbresult.Result{Server: "https://mensura.cdn-apple.com/api/v1/gm/config", Started: time.Now().UTC(), Grades: bbresult.Grades{DSLReports: "A"}}
	for i, p := range []string{"idle_before", "download", "upload", "bidirectional", "idle_after"} {
		res.Phases = append(res.Phases, bbresult.Phase{Name: p, Start: float64(i * 10), End: float64(i*10 + 10)})
	}
	for i := range 5000 {
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: float64(i) / 100, RTT: 20 + float64(i%9)})
	}
	for i := range 200 {
		res.Samples.Throughput = append(res.Samples.Throughput, bbresult.Throughput{T: float64(i) / 4, Download: 30, Upload: 7})
	}
	writeJSON(t, r.Path("/var/run/sqmkit/luci/test/results/20261201-120000-00.json"), res)
	writeJSON(t, r.Path("/var/run/sqmkit/luci/test/results/20261201-120100-00.json"), bbresult.Result{Server: res.Server, Started: time.Now().UTC(),
		Incomplete: "no grade: the download never carried data", Phases: res.Phases})
	ctx := browser(t)
	r.login(t, ctx, "root", rootPass)
	_, mark := consoleErrors(0)
	var empty string
	run(t, ctx, "the result without samples", emulation.SetDeviceMetricsOverride(390, 844, 3, true), r.page("test"),
		chromedp.WaitVisible(".sqmkit-no-chart", chromedp.ByQuery), textOf(".sqmkit-no-chart", &empty))
	if !strings.Contains(empty, "never carried data") {
		t.Errorf("the empty chart says %q", empty)
	}
	var small, overlaps, texts int
	run(t, ctx, "the chart with samples", chromedp.Click(`.sqmkit-result[data-id="20261201-120000-00"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#sqmkit-chart[data-id="20261201-120000-00"] svg.sqmkit-chart`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#sqmkit-chart svg text').length`, &texts),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#sqmkit-chart svg text')).filter(function(e) { return e.getBoundingClientRect().height > 0 && parseFloat(getComputedStyle(e).fontSize) * e.ownerSVGElement.getBoundingClientRect().width / e.ownerSVGElement.viewBox.baseVal.width < 11; }).length`, &small),
		chromedp.Evaluate(`(function() { var n = 0, hit = function(a, b) { return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; };
			document.querySelectorAll('#sqmkit-chart svg').forEach(function(s) {
				s.querySelectorAll('text.sqmkit-legend').forEach(function(l) { s.querySelectorAll('text.sqmkit-band').forEach(function(b) {
					if (hit(l.getBoundingClientRect(), b.getBoundingClientRect())) n++; }); }); });
			return n; })()`, &overlaps))
	if texts == 0 || small != 0 || overlaps != 0 {
		t.Errorf("at 390 px: %d of %d chart texts under 11 px, %d legend entries over a phase's name", small, texts, overlaps)
	}
	if errs, _ := consoleErrors(mark); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestHistoryAcrossReboot: what the router learnt (a test's grade and CPU
// cost, the rates a tune wrote) is on flash: after a reboot, which empties
// /var/run, the status page still shows the grade, the tuned rates and the
// router's ceiling, to root and to the read-only login alike.
func TestHistoryAcrossReboot(t *testing.T) {
	r := newRouter(t, nil)
	if out, err := r.Exec("/usr/bin/sqmkit", "test", "--quiet", "--idle", "1s", "--download", "3s", "--upload", "3s", "--bidir", "0", r.server); err != nil {
		t.Fatalf("sqmkit test on the router: %v\n%s", err, out)
	}
	// a finished tune, written from the page's Write (rpcd's tune_write)
	dir := r.Path("/var/run/sqmkit/luci/tune")
	out := "/var/run/sqmkit/luci/tune/out.json"
	writeJSON(t, filepath.Join(dir, "meta.json"), map[string]any{"started": time.Now().UTC(), "server": r.server, "section": "wan", "target": "A+", "budget_s": 180, "out": out})
	writeJSON(t, r.Path(out), tune.Outcome{Search: &search.Result{Download: search.Choice{RateKbit: 18500, Line: search.Line{RateKbit: 19800}}, Upload: search.Choice{RateKbit: 9200, Line: search.Line{RateKbit: 9900}}},
		Confirm: &bbresult.Result{Grades: bbresult.Grades{DSLReports: "A+"}}, Spent: 150 * time.Second})
	if b, err := r.Exec("ubus", "call", "sqmkit", "tune_write"); err != nil || !strings.Contains(string(b), "written") {
		t.Fatalf("tune_write: %v\n%s", err, b)
	}
	before, _ := r.Exec("ubus", "call", "sqmkit", "status")
	t.Logf("ceiling before the reboot: %v", strings.Contains(string(before), "ceiling_mbps"))
	if err := r.Reboot(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Path("/var/run/sqmkit/cpu/wan.json")); err == nil {
		t.Fatal("the reboot kept /var/run: the case is not made")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := r.Forward(ctx, "127.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	r.base = "http://" + addr
	for _, login := range [][2]string{{"root", rootPass}, {viewer, viewerPass}} {
		ctx := browser(t)
		r.login(t, ctx, login[0], login[1])
		var grades int
		var tuned, ceiling string
		run(t, ctx, "status after the reboot as "+login[0], r.page("status"), chromedp.WaitVisible(".sqmkit-history", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('.sqmkit-history table.sqmkit-grades tr td').length`, &grades),
			textOf(".sqmkit-history .sqmkit-tuned", &tuned), textOf(".sqmkit-history .sqmkit-ceiling", &ceiling))
		if grades == 0 || !strings.Contains(tuned, "download 18500 and upload 9200") || !strings.Contains(tuned, "19800 / 9900") {
			t.Errorf("as %s after the reboot: %d grade cells, tuned %q", login[0], grades, tuned)
		}
		if strings.Contains(string(before), "ceiling_mbps") && !strings.Contains(ceiling, "shapes up to about") {
			t.Errorf("as %s after the reboot the ceiling is gone (%q); before it:\n%s", login[0], ceiling, before)
		}
	}
}
