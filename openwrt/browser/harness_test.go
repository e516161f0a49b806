package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/openwrt/stack"
)

// The logins of the router: root with every right, and a read-only one
// (rpcd's `list read '*'` and no write) as an admin gives a viewer.
const (
	rootPass   = "sqmkit-root"
	viewer     = "viewer"
	viewerPass = "sqmkit-view"
)

// router is the real OpenWrt stack (openwrt/stack) with sqmkit installed
// by `sqmkit install`, a queue on its WAN port wan run by sqm-scripts with
// a sqmkit script, and a sqmkit serve (its responsiveness server too, the
// queue's test_server) past the link in a namespace of its
// own (server). The host kernel has no fq_codel: the tc shim maps the nss
// backend onto tbf and pfifo (openwrt/test's harness says how).
type router struct {
	*stack.Router
	server string // the sqmkit serve's address
	base   string // LuCI on the host's loopback: http://127.0.0.1:PORT
	bin    string // the host's builds: sqmkit, tc (the shim)
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// build makes the router build of sqmkit (as the package builds it), the
// full one (the server's) and the tc shim, in sqmkit's own module.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sqmkit-luci")
		if err != nil {
			buildErr = err
			return
		}
		for _, b := range [][]string{
			{"-tags", "router", "-o", filepath.Join(dir, "sqmkit-router"), "./cmd/sqmkit"},
			{"-o", filepath.Join(dir, "sqmkit"), "./cmd/sqmkit"},
			{"-o", filepath.Join(dir, "tc"), "./internal/tc/tcshim"},
		} {
			if out, err := exec.Command("go", append([]string{"-C", "../..", "build"}, b...)...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %v: %v\n%s", b, err, out)
				return
			}
		}
		built = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// sqmConfig is /etc/config/sqm: the queue as luci-app-sqm writes it, with
// a sqmkit script.
const sqmConfig = `
config queue 'wan'
	option enabled '1'
	option interface 'wan'
	option download '20000'
	option upload '10000'
	option qdisc 'fq_codel'
	option script 'sqmkit-nss.qos'
	option linklayer 'none'
	option test_server 'https://10.91.0.2/config'
`

const network = `
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config interface 'wan'
	option device 'wan'
	option proto 'static'
	option ipaddr '10.91.0.1'
	option netmask '255.255.255.0'
`

// newRouter boots the router; extra (may be nil) changes its root first.
func newRouter(t *testing.T, extra func(root string) error) *router {
	t.Helper()
	tctest.NeedRoot(t)
	b := build(t)
	r := &router{bin: b, server: "10.91.0.2"}
	srv := fmt.Sprintf("sqmkit-luci-srv-%d", os.Getpid())
	exec.Command("ip", "netns", "del", srv).Run()
	if out, err := exec.Command("ip", "netns", "add", srv).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", srv).Run() })
	// the server's responsiveness side has a certificate the router
	// trusts through its CA bundle, where OpenWrt's ca-bundle puts it
	cert, key := tctest.Certificate(t, t.TempDir(), r.server)
	r.Router = stack.New(t, stack.Options{
		Netns: func(ns string) error {
			return ip([]string{"link", "add", "wan", "netns", ns, "type", "veth", "peer", "name", "srv", "netns", srv},
				[]string{"-n", srv, "addr", "add", r.server + "/24", "dev", "srv"},
				[]string{"-n", srv, "link", "set", "srv", "up"}, []string{"-n", srv, "link", "set", "lo", "up"})
		},
		Setup: func(root string) error {
			for p, text := range map[string]string{"etc/config/network": network, "etc/config/sqm": sqmConfig,
				"usr/sbin/tc.env": "SQMKIT_REAL_TC=/sbin/tc\nSQMKIT_SHIM_FQ_CODEL=pfifo\n"} {
				if err := os.WriteFile(filepath.Join(root, p), []byte(text), 0o644); err != nil {
					return err
				}
			}
			if err := os.Rename(filepath.Join(root, "usr/sbin/tc"), filepath.Join(root, "sbin/tc")); err != nil {
				return err
			}
			if err := copyFile(filepath.Join(b, "tc"), filepath.Join(root, "usr/sbin/tc"), 0o755); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755); err != nil {
				return err
			}
			if err := copyFile(cert, filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), 0o644); err != nil {
				return err
			}
			if err := logins(root); err != nil {
				return err
			}
			if extra != nil {
				return extra(root)
			}
			return nil
		},
	})
	if err := copyFile(filepath.Join(b, "sqmkit-router"), r.Path("/tmp/sqmkit"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"/tmp/sqmkit", "install", "--no-deps"}, {"/etc/init.d/sqm", "restart"}} {
		if out, err := r.Exec(c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	serve := exec.Command("ip", "netns", "exec", srv, filepath.Join(b, "sqmkit"), "serve", "--listen", r.server+":8693",
		"--rpm", r.server+":443", "--rpm-cert", cert, "--rpm-key", key)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	if err := tctest.WaitListening(srv, "tcp", 8693, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := r.Forward(ctx, "127.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	r.base = "http://" + addr
	return r
}

// logins sets root's password (rpcd's root login reads /etc/shadow) and
// adds the read-only login to /etc/config/rpcd, with crypt hashes made by
// busybox's mkpasswd.
func logins(root string) error {
	hash := func(pw string) (string, error) {
		out, err := exec.Command(filepath.Join(root, "bin/busybox"), "mkpasswd", "-m", "sha512", pw).Output()
		return strings.TrimSpace(string(out)), err
	}
	rh, err := hash(rootPass)
	if err != nil {
		return err
	}
	vh, err := hash(viewerPass)
	if err != nil {
		return err
	}
	shadow, err := os.ReadFile(filepath.Join(root, "etc/shadow"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/shadow"), []byte(strings.Replace(string(shadow), "root:::", "root:"+rh+"::", 1)), 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(root, "etc/config/rpcd"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "\nconfig login\n\toption username '%s'\n\toption password '%s'\n\tlist read '*'\n", viewer, vh)
	return err
}

func ip(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// browser starts a headless Chromium of its own (its own cookies: one
// login per browser); each tab is a context of it.
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
	// its profile outside t.TempDir: Chromium's helpers may still write
	// there when the test ends, which t.TempDir's removal takes for a failure
	profile, err := os.MkdirTemp("", "sqmkit-chromium")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(profile),
		chromedp.CombinedOutput(&chromeOut))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel2)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	listen(ctx)
	return ctx
}

// chromeOut is what Chromium printed, for a failure's report.
var chromeOut syncBuffer

type syncBuffer struct {
	sync.Mutex
	b strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) { s.Lock(); defer s.Unlock(); return s.b.Write(p) }

func (s *syncBuffer) String() string { s.Lock(); defer s.Unlock(); return s.b.String() }

// console keeps what the pages logged and threw.
var console struct {
	sync.Mutex
	lines []string
}

// listen records a tab's console errors and uncaught exceptions.
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

// consoleErrors are the errors and exceptions logged since mark (an index
// of console.lines), and the new mark.
func consoleErrors(mark int) ([]string, int) {
	console.Lock()
	defer console.Unlock()
	var out []string
	for _, l := range console.lines[mark:] {
		if strings.HasPrefix(l, "error:") || strings.HasPrefix(l, "exception:") {
			out = append(out, l)
		}
	}
	return out, len(console.lines)
}

// inTab runs actions in a second page of the same browser, as a second
// window would, and closes it (a page left in front would leave the first
// one's timers throttled).
func inTab(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := chromedp.NewContext(ctx)
	defer cancel()
	listen(c)
	run(t, c, what, actions...)
	chromedp.Run(ctx, page.BringToFront())
}

// run runs browser actions with a deadline and fails the test on an error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	runFor(t, ctx, 60*time.Second, what, actions...)
}

// runFor is run with the deadline d.
func runFor(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		var page string
		chromedp.Run(ctx, chromedp.OuterHTML("#maincontent", &page, chromedp.ByQuery))
		console.Lock()
		defer console.Unlock()
		t.Fatalf("%s: %v\n%s\nconsole:\n%s\nchromium:\n%s", what, err, page, strings.Join(console.lines, "\n"), chromeOut.String())
	}
}

// waitText waits until the element sel's text holds want.
func waitText(sel, want string) chromedp.Action {
	return chromedp.Poll(`(function() { var e = document.querySelector(`+strconv.Quote(sel)+`); return !!e && e.textContent.indexOf(`+strconv.Quote(want)+`) >= 0; })()`, nil, chromedp.WithPollingInterval(200*time.Millisecond))
}

// textOf reads the text of the element sel finds in one script, so a poll
// that rebuilds the element between finding it and reading it (as the
// autorate page does every 5 s) cannot make the read fail; "" if absent.
func textOf(sel string, text *string) chromedp.Action {
	return chromedp.Evaluate(`(function() { var e = document.querySelector(`+strconv.Quote(sel)+`); return e ? e.innerText : ''; })()`, text)
}

// login logs user in through LuCI's login page, as a person does.
func (r *router) login(t *testing.T, ctx context.Context, user, pass string) {
	t.Helper()
	run(t, ctx, "log in as "+user, chromedp.Navigate(r.base+"/cgi-bin/luci/admin/network/sqmkit/status"),
		chromedp.WaitVisible("#luci_password", chromedp.ByQuery),
		chromedp.SetValue("#luci_username", user, chromedp.ByQuery), chromedp.SetValue("#luci_password", pass, chromedp.ByQuery),
		chromedp.Click(".modal button.cbi-button-positive", chromedp.ByQuery),
		chromedp.WaitVisible("h2", chromedp.ByQuery), waitText("#maincontent", "SQM proof"))
}

// page opens one of sqmkit's pages and waits for its view.
func (r *router) page(name string) chromedp.Action {
	return chromedp.Tasks{chromedp.Navigate(r.base + "/cgi-bin/luci/admin/network/sqmkit/" + name),
		chromedp.WaitNotPresent("#view .spinning", chromedp.ByQuery), chromedp.WaitVisible("#view h2", chromedp.ByQuery)}
}
