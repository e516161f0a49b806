package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// journeyStep is one step of the journey and when it ended (host clock).
type journeyStep struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

// TestJourney is the browser's part of the lab's journey scenario
// (lab/journey.go), run by sqmkit-lab on the host while the guest's
// router (OpenWrt's real userland on a bloated link) waits: what a router
// owner does in LuCI, from the login to autorate's moving chart. Without
// SQMKIT_JOURNEY (the lab's journey directory) it skips: the lab runs it.
func TestJourney(t *testing.T) {
	dir, base := os.Getenv("SQMKIT_JOURNEY"), os.Getenv("SQMKIT_JOURNEY_URL")
	if dir == "" || base == "" {
		t.Skip("the lab's journey runs this (sqmkit-lab journey; make test): SQMKIT_JOURNEY and SQMKIT_JOURNEY_URL are unset")
	}
	var ready struct {
		DownKbit      int    `json:"down_kbit"`
		UpKbit        int    `json:"up_kbit"`
		Device        string `json:"device"`
		Script        string `json:"script"`
		Server        string `json:"server"`
		DefaultServer string `json:"default_server"`
		Password      string `json:"password"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "ready.json"))
	if err != nil || json.Unmarshal(b, &ready) != nil {
		t.Fatalf("ready.json: %v %s", err, b)
	}
	out := struct {
		OK      bool          `json:"ok"`
		Error   string        `json:"error,omitempty"`
		LoginAt time.Time     `json:"login_at"`
		Steps   []journeyStep `json:"steps"`
	}{}
	step := func(name, note string) {
		out.Steps = append(out.Steps, journeyStep{Name: name, At: time.Now().UTC(), Note: note})
		t.Logf("%s %s %s", time.Now().UTC().Format("15:04:05"), name, note)
		b, _ := json.MarshalIndent(out, "", " ")
		os.WriteFile(filepath.Join(dir, "browser.json"), b, 0o644)
	}
	defer func() {
		out.OK = !t.Failed()
		if t.Failed() {
			out.Error = "a step failed: see browser.log"
		}
		step("end", "")
	}()
	r := &router{base: base, server: ready.Server}
	ctx := browser(t)
	r.login(t, ctx, "root", ready.Password)
	out.LoginAt = time.Now().UTC()
	step("logged in", "")

	journeyQueue(t, ctx, r, ready.Device, ready.Script, ready.DownKbit, ready.UpKbit, step)
	journeyTestAndTune(t, ctx, r, ready.DefaultServer, step)
	journeyAutorate(t, ctx, r, ready.Server, step)
}

// changed fires the events LuCI's widgets listen to on the inputs sel finds.
func changed(sel string) chromedp.Action {
	return chromedp.Evaluate(`document.querySelectorAll(`+strconv.Quote(sel)+`).forEach(function(i) {
		i.dispatchEvent(new Event('input', { bubbles: true })); i.dispatchEvent(new Event('change', { bubbles: true })); })`, nil)
}

// reloadUntil loads the page again until sel's text holds want (what
// sqm-scripts applies after Save & Apply arrives a little later).
func reloadUntil(load chromedp.Action, sel, want string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			var text string
			if err := chromedp.Run(ctx, load, chromedp.Sleep(2*time.Second), textOf(sel, &text)); err != nil {
				return err
			}
			if strings.Contains(text, want) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(3 * time.Second):
			}
		}
	})
}

// journeyQueue: the queue set on luci-app-sqm's page and saved, then
// sqmkit's status page says it is shaped as planned.
func journeyQueue(t *testing.T, ctx context.Context, r *router, device, script string, down, up int, step func(name, note string)) {
	// luci-app-sqm: the queue (sqm-scripts' own section) on the WAN, its
	// rates, the sqmkit script, Save & Apply
	sqm := r.base + "/cgi-bin/luci/admin/network/sqm"
	sec := `.cbi-section-node[data-section-id]`
	run(t, ctx, "luci-app-sqm's page", chromedp.Navigate(sqm), chromedp.WaitVisible(sec, chromedp.ByQuery),
		chromedp.Click(sec+` [data-name="enabled"] input[type=checkbox]`, chromedp.ByQuery),
		// the interface: LuCI's device dropdown, chosen through its widget
		// (a click on its list lands on whichever item is under the pointer
		// while it still lays out)
		chromedp.WaitVisible(sec+` [data-name="interface"] .cbi-dropdown`, chromedp.ByQuery),
		chromedp.Evaluate(`(function() { var w = L.dom.findClassInstance(document.querySelector(`+strconv.Quote(sec+` [data-name="interface"] .cbi-dropdown`)+`));
			w.setValue(`+strconv.Quote(device)+`); return w.getValue(); })()`, nil),
		chromedp.SetValue(sec+` [data-name="download"] input`, strconv.Itoa(down), chromedp.ByQuery),
		chromedp.SetValue(sec+` [data-name="upload"] input`, strconv.Itoa(up), chromedp.ByQuery),
		changed(sec+` [data-name="download"] input, `+sec+` [data-name="upload"] input`),
		chromedp.Click(`li[data-tab="tab_qdisc"] a`, chromedp.ByQuery),
		chromedp.SetValue(sec+` [data-name="script"] select`, script, chromedp.ByQuery),
		changed(sec+` [data-name="script"] select`),
		chromedp.Click(`.cbi-page-actions .cbi-button-apply li[data-value="0"]`, chromedp.ByQuery),
		waitText("body", "Configuration changes applied."), chromedp.Sleep(3*time.Second))
	step("queue set on luci-app-sqm's page, saved and applied", fmt.Sprintf("%s, %d/%d kbit/s, %s", device, down, up, script))

	var verdict string
	var fails int
	runFor(t, ctx, 3*time.Minute, "status shaped as planned", reloadUntil(r.page("status"), ".sqmkit-verdict", "Shaped as planned"),
		textOf(".sqmkit-verdict", &verdict), chromedp.WaitVisible("#sqmkit-doctor", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('tr.sqmkit-finding[data-severity="fail"]').length`, &fails))
	if fails != 0 {
		t.Errorf("the doctor has %d failing findings", fails)
	}
	step("status: shaped as planned, the doctor has no error", verdict)

}

// journeyTestAndTune: a test and a tune from sqmkit's pages with nothing
// typed, the tune's rates written.
func journeyTestAndTune(t *testing.T, ctx context.Context, r *router, defaultServer string, step func(name, note string)) {
	// Test and Tune as a router owner starts them: the Server field left
	// empty, so both go to the public default (the lab impersonates it)
	var grade string
	run(t, ctx, "start a test", r.page("test"), chromedp.Click("#sqmkit-test-start", chromedp.ByQuery),
		waitText("#sqmkit-test-running", "A test runs against "+defaultServer))
	runFor(t, ctx, 6*time.Minute, "the test's grade", chromedp.WaitVisible(".sqmkit-result .sqmkit-grade-letter", chromedp.ByQuery),
		textOf(".sqmkit-result .sqmkit-grade-letter", &grade))
	step("test from the page (Server empty) graded the link", grade)

	var found string
	run(t, ctx, "start a tune", r.page("tune"), chromedp.Click("#sqmkit-tune-start", chromedp.ByQuery),
		waitText("#sqmkit-tune-running", "against "+defaultServer))
	runFor(t, ctx, 15*time.Minute, "the tune's outcome", chromedp.WaitVisible("#sqmkit-outcome", chromedp.ByQuery),
		textOf("#sqmkit-outcome", &found))
	if !strings.Contains(found, "Found for") {
		t.Fatalf("the tune found no rates: %s", found)
	}
	step("tune found rates", strings.Join(strings.Fields(found), " "))
	run(t, ctx, "write the found rates", chromedp.WaitVisible("#sqmkit-tune-write", chromedp.ByQuery), chromedp.Click("#sqmkit-tune-write", chromedp.ByQuery),
		chromedp.WaitVisible("#sqmkit-confirm", chromedp.ByQuery), chromedp.Click("#sqmkit-confirm", chromedp.ByQuery),
		waitText("#maincontent", "Written: download"))
	step("Write kept them", "")

}

// journeyAutorate: autorate switched on with a sqmkit serve for its
// one-way delays; its chart moves.
func journeyAutorate(t *testing.T, ctx context.Context, r *router, server string, step func(name, note string)) {
	// autorate on, with the lab's server for its one-way delays
	auto := `.cbi-section-node[data-section-id]`
	run(t, ctx, "switch autorate on", r.page("autorate"),
		chromedp.WaitVisible(auto+` [data-name="autorate"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.Click(auto+` [data-name="autorate"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.WaitVisible(auto+` [data-name="autorate_server"] input`, chromedp.ByQuery),
		chromedp.SendKeys(auto+` [data-name="autorate_server"] input`, server, chromedp.ByQuery),
		chromedp.Click(`.cbi-page-actions .cbi-button-apply li[data-value="0"]`, chromedp.ByQuery),
		waitText("body", "Configuration changes applied."), chromedp.Sleep(3*time.Second))
	step("autorate switched on, saved and applied", "")
	points := func() int {
		var n int
		chromedp.Run(ctx, chromedp.Evaluate(`(function() { var p = document.querySelector('.sqmkit-autorate svg.sqmkit-chart path.sqmkit-series');
			return p ? (p.getAttribute('d').match(/L/g) || []).length : 0; })()`, &n))
		return n
	}
	runFor(t, ctx, 3*time.Minute, "autorate running", waitText(".sqmkit-rates", "Running."))
	first := points()
	time.Sleep(15 * time.Second)
	if next := points(); next <= first {
		t.Fatalf("autorate's chart did not move: %d points, then %d", first, next)
	}
	step("autorate's chart moves", "")
}
