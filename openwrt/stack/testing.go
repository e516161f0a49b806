package stack

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// Options say what a test's router has before it boots.
type Options struct {
	// Netns adds devices to the router's network namespace (named ns)
	// before procd boots, so netifd finds them at boot.
	Netns func(ns string) error
	// Setup changes the copied root (Config.Setup).
	Setup func(root string) error
}

// New boots the real stack for a test, in a network namespace of its own
// (lo, and what o.Netns adds). The router halts and the namespace goes
// when t ends. Without root, or without what scripts/deps.sh installs, it
// skips (fails under CI=true).
func New(t testing.TB, o Options) *Router {
	t.Helper()
	tctest.NeedRoot(t)
	for _, p := range []string{"unshare", "nsenter", "chroot", "cmake", "gcc"} {
		if _, err := exec.LookPath(p); err != nil {
			tctest.Missing(t, "the real OpenWrt stack needs %s (installed by scripts/deps.sh)", p)
		}
	}
	stackRoot, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("sqmkit-owrt-%d-%d", os.Getpid(), seq())
	exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if o.Netns != nil {
		if err := o.Netns(ns); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	r, err := Boot(Config{Stack: stackRoot, Dir: dir, Netns: ns, Setup: o.Setup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Halt()
		if t.Failed() {
			b, _ := os.ReadFile(r.Console)
			t.Logf("the router's console:\n%s", b)
		}
	})
	return r
}

var counter = make(chan int, 1)

func init() { counter <- 0 }

// seq numbers the routers of one test process.
func seq() int {
	n := <-counter
	counter <- n + 1
	return n
}
