package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// The router owner's journey: the router namespace is OpenWrt's real
// userland on a bloated profile, with sqmkit installed as the README says,
// and a person's path through LuCI is driven by headless Chromium on the
// host (openwrt/browser's TestJourney, through QEMU's forwarded port and a
// relay into the client's namespace, as a LAN browser reaches the
// router): log in, set the queue on luci-app-sqm's page (interface, rates
// at 95 % of the line, script sqmkit-cake.qos), Save & Apply; on sqmkit's
// pages status reads "shaped as planned" and the doctor has no error, a
// test grades the link, tune finds rates and Write keeps them, autorate
// is switched on and its chart moves. Then the lab's own test from the
// client must grade A+. The guest and the host meet through files in
// the run's journey/ directory: the guest writes ready.json when the
// router is up, the host runs the browser and writes done.json.

// journeyPort is where the guest listens for the host's forwarded port.
const journeyPort = "8080"

// journeyWait is how long the guest waits for the browser's part.
const journeyWait = 30 * time.Minute

// journeyReady is what the guest tells the browser.
type journeyReady struct {
	DownKbit int    `json:"down_kbit"` // 95 % of the line
	UpKbit   int    `json:"up_kbit"`
	Device   string `json:"device"`
	Script   string `json:"script"`
	Server   string `json:"server"` // the sqmkit serve, for autorate's one-way delays
	// DefaultServer is what a test or tune with no server measures
	// against, the public default the lab impersonates.
	DefaultServer string `json:"default_server"`
	Password      string `json:"password"`
}

// journeyDone is what the host's browser run reports (TestJourney writes
// its steps; the host adds the exit).
type journeyDone struct {
	OK      bool          `json:"ok"`
	Error   string        `json:"error,omitempty"`
	LoginAt time.Time     `json:"login_at"`
	Steps   []journeyStep `json:"steps"`
}

type journeyStep struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

// journeyResult is the journey in a result.
type journeyResult struct {
	Steps      []journeyStep `json:"steps"`
	LoginToAPS float64       `json:"login_to_a_plus_s"` // from the login to the end of the lab's A+ grade
	Grade      string        `json:"grade"`
}

// journeyPassword is the router's root password for the journey.
const journeyPassword = "sqmkit-journey"

func (g *guest) journey(p *profile.Profile) []result {
	r := result{Profile: p.Name, Backend: "journey", Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Kernel: g.kernel,
		Dir: filepath.Join(g.out, p.Name+"-journey")}
	os.MkdirAll(r.Dir, 0o755)
	r.ended(g.journeyRun(p, &r))
	g.say("%s/journey: %s", p.Name, r.line())
	writeJSON(filepath.Join(r.Dir, "result.json"), &r)
	return []result{r}
}

func (g *guest) journeyRun(p *profile.Profile, r *result) error {
	logf, err := os.Create(filepath.Join(r.Dir, "commands.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := hostNIC(); err != nil {
		return err
	}
	t, err := buildTopoFor(&shell{log: logf}, p, filepath.Join("/tmp/lab", p.Name+"-journey"), r.Dir, true)
	if err != nil {
		return err
	}
	defer t.close()
	if err := t.startServers(g.tools.sqmkit, g.tools.serve); err != nil {
		return err
	}
	// the public default, impersonated: nothing in the journey names a
	// server for a test or a tune, so every one goes where a router
	// owner's would (by name, its certificate checked against the
	// router's CA bundle), here the reference server past the modem
	pub, err := t.publicServer(g.tools.sqmkit)
	if err != nil {
		return err
	}
	// the router as a fresh OpenWrt with LuCI and luci-app-sqm's
	// sqm-scripts, a root password set
	_, network := routerUCI(p, t.wanDev, "cake", "", 0, 0)
	o, err := g.bootOpenWrt(t, "journey", network, "", nil, func(root string) error {
		if err := impersonate(root, pub); err != nil {
			return err
		}
		return setRootPassword(root, journeyPassword)
	})
	if err != nil {
		return err
	}
	defer o.halt()
	if err := o.waitUp("wan", time.Minute); err != nil {
		return fmt.Errorf("netifd did not bring wan up: %w", err)
	}
	if err := o.installSqmkit(g, logf); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := relay(ctx, ":"+journeyPort, nsClient, "10.1.0.1:80"); err != nil {
		return err
	}
	dir := filepath.Join(g.out, "journey")
	os.MkdirAll(dir, 0o755)
	os.Remove(filepath.Join(dir, "done.json"))
	ready := journeyReady{DownKbit: p.Down * 95 / 100, UpKbit: p.Up * 95 / 100, Device: t.wanDev, Script: "sqmkit-cake.qos", Server: serverIP, DefaultServer: pub.URL, Password: journeyPassword}
	if err := writeJSON(filepath.Join(dir, "ready.json"), ready); err != nil {
		return err
	}
	g.say("%s/journey: OpenWrt is up; the host's browser takes over (LuCI at 10.1.0.1 from the client's side)", p.Name)
	var done journeyDone
	if err := waitFor(journeyWait, func() bool { return readJSONFile(filepath.Join(dir, "done.json"), &done) == nil }); err != nil {
		return fmt.Errorf("the host's browser did not finish within %v (journey/browser.log)", journeyWait)
	}
	r.Journey = &journeyResult{Steps: done.Steps}
	for _, s := range done.Steps {
		g.say("%s/journey: %s %s", p.Name, s.At.Format("15:04:05"), s.Name)
	}
	if !done.OK {
		return fmt.Errorf("in the browser: %s (journey/browser.log)", done.Error)
	}
	defaults, err := g.journeyDefaults(t, o, pub, logf, r.Dir)
	if err != nil {
		return err
	}
	// the rates the default tune wrote, as the config holds them
	qs, err := config.Resolve(o.Path("/"), "", nil, t.wanDev)
	if err != nil {
		return err
	}
	r.DownKbit, r.UpKbit = qs[0].Download, qs[0].Upload
	os.WriteFile(filepath.Join(r.Dir, "tc-before.txt"), []byte(t.tcStats()), 0o644)
	gerr := g.grade(t, r, true)
	end := time.Now()
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	if gerr != nil {
		return gerr
	}
	// autorate moves the rates it runs at: goodput is held to what the
	// shaper ran at while it was measured, not to the written base
	r.DownKbit = liveRate(o, t.wanDev)
	r.Checks = accept.Shaped(*r.Test, r.DownKbit)
	out, _ := o.run(logf, "/usr/bin/sqmkit", "doctor", "--json")
	r.Checks = append(append(r.Checks, doctorCheck(out)), defaults...)
	r.Journey.Grade = r.Test.Grade
	r.Journey.LoginToAPS = end.Sub(done.LoginAt).Seconds()
	if r.Test.Grade != "A+" {
		r.Checks = append(r.Checks, checkOf("the lab's grade from the client", false, "A+, got "+r.Test.Grade))
	}
	r.Status = status(r.Checks)
	return nil
}

// setRootPassword sets root's password in a root's /etc/shadow (rpcd's
// root login reads it), hashed by the root's busybox mkpasswd.
func setRootPassword(root, pw string) error {
	out, err := exec.Command(filepath.Join(root, "bin/busybox"), "mkpasswd", "-m", "sha512", pw).Output()
	if err != nil {
		return fmt.Errorf("mkpasswd: %w", err)
	}
	p := filepath.Join(root, "etc/shadow")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "root:::") {
		return errors.New("etc/shadow has no root line without a password")
	}
	return os.WriteFile(p, []byte(strings.Replace(string(b), "root:::", "root:"+strings.TrimSpace(string(out))+"::", 1)), 0o600)
}

// liveRate is the kbit/s the download shaper runs at now (the IFB's cake).
func liveRate(o *owrtRouter, dev string) int {
	out, _ := o.Exec("tc", "qdisc", "show", "dev", "ifb4"+dev, "root")
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "bandwidth" && i+1 < len(f) {
			v := f[i+1]
			mult := 1.0
			switch {
			case strings.HasSuffix(v, "Mbit"):
				mult, v = 1000, strings.TrimSuffix(v, "Mbit")
			case strings.HasSuffix(v, "Kbit"):
				v = strings.TrimSuffix(v, "Kbit")
			}
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return int(n * mult)
			}
		}
	}
	return 0
}

// impersonate makes an OpenWrt root take the lab's impersonation for the
// public default: its host in /etc/hosts, its CA where OpenWrt's ca-bundle
// puts the system's (refserver.WritePublic).
func impersonate(root string, pub *refserver.Public) error {
	f, err := os.OpenFile(filepath.Join(root, "etc/hosts"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(pub.Hosts)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	certs := filepath.Join(root, "etc/ssl/certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(certs, "ca-certificates.crt"), []byte(pub.CA), 0o644)
}

// defaultPhases are the CLI's tests of the journey's default path: short,
// every phase (the grade of each is the lab's own test's job).
var defaultPhases = []string{"--quiet", "--idle", "2s", "--download", "5s", "--upload", "5s", "--bidir", "5s"}

// journeyDefaults checks the path a router owner takes with nothing
// typed, past LuCI's pages: the page's test went to the impersonated
// public server, as `sqmkit test` with no server does on the router
// (router build) and from the client (full build); the queue's option
// test_server takes it to the sqmkit serve instead; `sqmkit tune --write`
// with no server writes rates found against the public server. A default
// that reached anything else fails its check.
func (g *guest) journeyDefaults(t *topo, o *owrtRouter, pub *refserver.Public, logf io.Writer, dir string) ([]accept.Check, error) {
	public := serverIP + ":443"
	var page *bbresult.Result
	if names, _ := filepath.Glob(o.Path("/var/run/sqmkit/luci/test/results/*.json")); len(names) > 0 {
		page, _ = readResult(names[len(names)-1])
	}
	cs := []accept.Check{defaultCheck("LuCI's test, Server empty", page, pub.URL, public)}
	onRouter := func(js string) *bbresult.Result {
		o.run(logf, "/usr/bin/sqmkit", append([]string{"test", "--json", js}, defaultPhases...)...)
		r, _ := readResult(o.Path(js))
		return r
	}
	cs = append(cs, defaultCheck("sqmkit test on the router (router build), no server", onRouter("/tmp/default.json"), pub.URL, public))
	js := filepath.Join(dir, "client-default.json")
	out, err := t.sh.run(nsClient, refserver.Confined(pub.Client, append([]string{g.tools.sqmkit, "test", "--json", js}, defaultPhases...))...)
	fmt.Fprintf(logf, "# client: sqmkit test, no server (%v)\n%s", err, out)
	client, _ := readResult(js)
	cs = append(cs, defaultCheck("sqmkit test from the client (full build), no server", client, pub.URL, public))
	// the queue's option test_server names the sqmkit serve: a test with
	// no server goes there (its one-way split says so), then unset again
	qs, err := config.Resolve(o.Path("/"), "", nil, t.wanDev)
	if err != nil {
		return nil, err
	}
	opt := "sqm." + qs[0].Section + ".test_server"
	o.run(logf, "uci", "set", opt+"="+serverIP)
	o.run(logf, "uci", "commit", "sqm")
	res := onRouter("/tmp/test-server.json")
	c := defaultCheck("sqmkit test on the router with option test_server (a sqmkit serve)", res, serverIP, serverIP+":8693")
	c.OK = c.OK && !res.RTTOnly // defaultCheck: res is not nil when OK
	cs = append(cs, c)
	o.run(logf, "uci", "delete", opt)
	o.run(logf, "uci", "commit", "sqm")
	// tune --write, no server: the public one, at the least budget
	o.run(logf, "/usr/bin/sqmkit", "tune", "--write", "--budget", "140s", "--json", "/tmp/tune-default.json")
	var tuned tune.Outcome
	readJSONFile(o.Path("/tmp/tune-default.json"), &tuned)
	c = defaultCheck("sqmkit tune --write on the router, no server: its confirming test", tuned.Confirm, pub.URL, public)
	if c.OK = c.OK && tuned.Written; !tuned.Written {
		c.Name += ": nothing written (" + tuned.Error + ")"
	}
	cs = append(cs, c)
	for _, c := range cs {
		verdict := "ok"
		if !c.OK {
			verdict = "FAILED, want " + c.Want
		}
		g.say("%s/journey: %s: %s", t.p.Name, c.Name, verdict)
	}
	return cs, nil
}

// defaultCheck: res was graded against server, reached at addr.
func defaultCheck(name string, res *bbresult.Result, server, addr string) accept.Check {
	c := accept.Check{Name: name, Want: fmt.Sprintf("graded against %s at %s", server, addr)}
	if res == nil {
		c.Name += ": no result"
		return c
	}
	c.OK = res.Server == server && res.ServerAddr == addr && res.Incomplete == "" && res.Grades.DSLReports != ""
	if !c.OK {
		c.Name += fmt.Sprintf(": measured against %s at %s, grade %q", res.Server, res.ServerAddr, res.Grades.DSLReports)
		if res.Incomplete != "" {
			c.Name += ", incomplete: " + res.Incomplete
		}
	}
	return c
}
