// Package tctest gives kernel tests a network namespace of their own: a veth
// pair inside a named namespace, and a way to run code (and the processes it
// starts) inside it without touching the host's interfaces.
package tctest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// NeedRoot skips t unless it runs as root with ip and tc on PATH (see
// Missing).
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root for network namespaces")
	}
	for _, p := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(p); err != nil {
			Missing(t, "needs %s on PATH", p)
		}
	}
}

// Missing ends a test whose prerequisite (root, a program
// scripts/deps.sh installs) this machine lacks: a skip on a developer's
// machine, a failure under CI=true, where a skipped test proves nothing
// and the project's own files install every prerequisite
// (TestMissingFailsUnderCI).
func Missing(t testing.TB, format string, a ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true, and "+format, a...)
	}
	t.Skipf(format, a...)
}

// Netns is a named namespace holding the veth pair Dev <-> Peer, both up.
// Of a NewPair, Peer is in the other namespace and Addr is Dev's IPv4.
type Netns struct {
	Name string
	Dev  string // the "WAN" device tests shape
	Peer string
	Addr string
}

// NewNetns creates sqmkit-test-<name>-<pid> and deletes it when t ends.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	NeedRoot(t)
	ns := &Netns{Name: fmt.Sprintf("sqmkit-test-%s-%d", name, os.Getpid()), Dev: "wan", Peer: "wanpeer"}
	exec.Command("ip", "netns", "del", ns.Name).Run() // leftover of a killed run
	for _, args := range [][]string{
		{"netns", "add", ns.Name},
		{"-n", ns.Name, "link", "add", ns.Dev, "type", "veth", "peer", "name", ns.Peer},
		{"-n", ns.Name, "link", "set", ns.Dev, "up"},
		{"-n", ns.Name, "link", "set", ns.Peer, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns.Name).Run() })
	return ns
}

// NewPair creates two namespaces joined by a veth, a's end at
// 10.<subnet>.0.1/24 and b's at .2, lo up in each; both go when t ends.
// `ip link add ... netns` creates each end inside its namespace, so only
// the namespaces' names need the pid.
func NewPair(t testing.TB, name string, subnet int) (a, b *Netns) {
	t.Helper()
	NeedRoot(t)
	pid := os.Getpid()
	a = &Netns{Name: fmt.Sprintf("sqmkit-test-%sa-%d", name, pid), Dev: name + "a", Addr: fmt.Sprintf("10.%d.0.1", subnet)}
	b = &Netns{Name: fmt.Sprintf("sqmkit-test-%sb-%d", name, pid), Dev: name + "b", Addr: fmt.Sprintf("10.%d.0.2", subnet)}
	a.Peer, b.Peer = b.Dev, a.Dev
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", a.Name).Run()
		exec.Command("ip", "netns", "del", b.Name).Run()
	})
	cmds := [][]string{
		{"netns", "add", a.Name}, {"netns", "add", b.Name},
		{"link", "add", a.Dev, "netns", a.Name, "type", "veth", "peer", "name", b.Dev, "netns", b.Name},
	}
	for _, ns := range []*Netns{a, b} {
		cmds = append(cmds, []string{"-n", ns.Name, "addr", "add", ns.Addr + "/24", "dev", ns.Dev},
			[]string{"-n", ns.Name, "link", "set", ns.Dev, "up"}, []string{"-n", ns.Name, "link", "set", "lo", "up"})
	}
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	return a, b
}

// Do runs fn on an OS thread that has entered the namespace, so fn's netlink
// sockets and every process it starts live there. The thread is never
// unlocked: the runtime discards it afterwards instead of reusing it.
func (ns *Netns) Do(t testing.TB, fn func()) {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %v", ns.Name, err)
			return
		}
		defer func() { done <- nil }()
		fn()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Exec runs a command inside the namespace and returns its combined output.
func (ns *Netns) Exec(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v: %s", name, args, ns.Name, err, out)
	}
	return string(out)
}
