// Package stack boots OpenWrt's real userland, built from pinned sources by
// scripts/openwrt-stack.sh, for the tests and the lab: a copy of its root
// (with sqmkit installed by `sqmkit install --root`, and whatever a test
// writes), procd as PID 1 of its own PID, mount, UTS and IPC namespaces in
// a named network namespace, booting through /etc/inittab, /etc/rc.d and
// the init scripts as a router does (ubusd, rpcd, netifd, uhttpd with
// LuCI, sqm-scripts, sqmkit). Nothing here stands in for OpenWrt: the
// harness only copies, boots, enters and halts. docs/hacking.md, "The real
// OpenWrt", says what runs and what a test cannot run here.
package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Path is OpenWrt's PATH (procd's EARLY_PATH and base-files' %PATH%).
const Path = "/usr/sbin:/usr/bin:/sbin:/bin"

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Build runs scripts/openwrt-stack.sh once per process (it returns at once
// when its cache holds the build) and returns the stack's root, which is
// read-only to its users: Boot copies it. $SQMKIT_OPENWRT_STACK names a
// root built already (the lab's guest, which cannot build).
func Build() (string, error) {
	buildOnce.Do(func() {
		if dir := os.Getenv("SQMKIT_OPENWRT_STACK"); dir != "" {
			built = dir
			return
		}
		repo, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		var stderr bytes.Buffer
		c := exec.Command("sh", filepath.Join(repo, "scripts/openwrt-stack.sh"))
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			buildErr = fmt.Errorf("scripts/openwrt-stack.sh: %v\n%s", err, stderr.Bytes())
			return
		}
		built = strings.TrimSpace(string(out))
	})
	return built, buildErr
}

// repoRoot is the checkout this package is in, found from the working
// directory (a test's is its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/sqmkit/sqmkit\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("not inside the sqmkit checkout: scripts/openwrt-stack.sh not found")
		}
		dir = up
	}
}

// Config says what to boot.
type Config struct {
	Stack string // the built root (Build); copied, never changed
	Dir   string // an empty directory: the router's root goes to Dir/root, its console to Dir/console.log
	Netns string // a named network namespace (ip netns) for the router; the caller makes and deletes it
	// Setup changes the copied root before procd boots it: install sqmkit,
	// write /etc/config, set passwords.
	Setup func(root string) error
	// Boot is how long the boot may take (default 60 s).
	Boot time.Duration
	// Objects are the ubus objects a boot is through with (default
	// session, network, uci and luci: rpcd, netifd and LuCI's plugin).
	Objects []string
}

// Router is a booted OpenWrt.
type Router struct {
	Root    string // its root directory, as the host sees it
	Netns   string
	Console string // procd's console output
	pid     int    // procd's pid on the host
	limit   time.Duration
	objects []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Booted is the file the harness's line in /etc/rc.local (run by
// /etc/init.d/done, START=95) leaves when the boot's init scripts have run.
const booted = "/tmp/.sqmkit-test-booted"

// Boot copies the stack, runs cfg.Setup on the copy and boots it: it
// returns once procd has run /etc/rc.d's boot scripts and rpcd, netifd
// and uhttpd answer on ubus.
func Boot(cfg Config) (*Router, error) {
	root := filepath.Join(cfg.Dir, "root")
	if out, err := exec.Command("cp", "-a", cfg.Stack, root).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying the stack: %v: %s", err, out)
	}
	// rc.local is the user's file on OpenWrt (base-files' ends in exit 0):
	// the test's line, first, says when the boot is through
	rc := filepath.Join(root, "etc/rc.local")
	b, err := os.ReadFile(rc)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(rc, append([]byte("touch "+booted+"\n"), b...), 0o644); err != nil {
		return nil, err
	}
	if cfg.Setup != nil {
		if err := cfg.Setup(root); err != nil {
			return nil, fmt.Errorf("setting up the router's root: %w", err)
		}
	}
	r := &Router{Root: root, Netns: cfg.Netns, Console: filepath.Join(cfg.Dir, "console.log"), limit: cfg.Boot, objects: cfg.Objects}
	if len(r.objects) == 0 {
		r.objects = []string{"session", "network", "uci", "luci"}
	}
	if r.limit == 0 {
		r.limit = 60 * time.Second
	}
	return r, r.start()
}

// containerInit prepares a container's root ($1) in its fresh mount
// namespace and execs procd's init in it: /proc and /sys (the router's
// network namespace's), a /dev with the usual nodes and devpts, and the
// console file ($2) as /dev/console, where procd and the boot's scripts
// write, so a guest's serial console never sees them.
const containerInit = `set -e
r=$1
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount -t tmpfs -o mode=0755,size=512k tmpfs "$r/dev"
for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
	mknod -m 666 "$r/dev/${n%%:*}" c $(echo "${n#*:}" | tr : ' ')
done
mkdir "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
ln -s /proc/self/fd "$r/dev/fd"
touch "$r/dev/console"
mount --bind "$2" "$r/dev/console"
exec chroot "$r" /sbin/init`

// start boots procd on the router's root.
func (r *Router) start() error {
	r.done, r.pid = make(chan struct{}), 0
	console, err := os.OpenFile(r.Console, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer console.Close()
	// procd as PID 1, as OpenWrt's containers run it: unshare forks it
	// into new PID, mount (private propagation: its mounts stay inside),
	// UTS and IPC namespaces, in the router's network namespace; with
	// $container set procd leaves /proc, /sys and /dev to its container
	// (containerInit mounts them, /dev/console being the console file)
	// and mounts /tmp itself.
	r.cmd = exec.Command("ip", "netns", "exec", r.Netns, "unshare", "--pid", "--mount", "--uts", "--ipc", "--fork",
		"--propagation", "private", "--kill-child", "/bin/sh", "-c", containerInit, "init", r.Root, r.Console)
	r.cmd.Env = []string{"PATH=" + Path, "TERM=dumb", "container=sqmkit-test"}
	r.cmd.Stdout, r.cmd.Stderr = console, console
	r.cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := r.cmd.Start(); err != nil {
		return err
	}
	done := r.done
	go func() { r.cmd.Wait(); close(done) }()
	if err := r.waitBoot(r.limit); err != nil {
		r.Halt()
		return fmt.Errorf("%w\n%s", err, r.tail())
	}
	return nil
}

// Reboot halts the router and boots its root again: what the last boot
// wrote to its flash (/etc, /usr) stays, its tmpfs (/tmp, /var) does not;
// the network namespace, and what the kernel holds in it, stay as a
// kernel's would not.
func (r *Router) Reboot() error {
	r.Halt()
	return r.start()
}

// tail is the end of the console, for an error.
func (r *Router) tail() string {
	b, _ := os.ReadFile(r.Console)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "console:\n" + string(b)
}

func (r *Router) waitBoot(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-r.done:
			return errors.New("procd exited during the boot")
		default:
		}
		if r.pid == 0 {
			r.pid = r.findProcd()
			continue
		}
		if _, err := os.Stat(r.Path(booted)); err != nil {
			continue // /tmp is procd's tmpfs, read through procd's root
		}
		if out, err := r.Exec("ubus", append([]string{"-t", "5", "wait_for"}, r.objects...)...); err != nil {
			return fmt.Errorf("the boot ran, but ubus lacks objects: %v: %s", err, out)
		}
		return nil
	}
	return fmt.Errorf("OpenWrt did not boot within %v", limit)
}

// findProcd is the host's pid of the namespace's PID 1 (init, then procd
// exec'd by preinit): the child of the unshare process.
func (r *Router) findProcd() int {
	if r.cmd.Process == nil {
		return 0
	}
	// ip netns exec execs unshare, which forks PID 1
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", r.cmd.Process.Pid, r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// PID is procd's pid as the host sees it.
func (r *Router) PID() int { return r.pid }

// Command is a command run inside the router: in all its namespaces and
// its root, with OpenWrt's PATH and nothing else of the caller's
// environment (extra adds to it).
func (r *Router) Command(extra []string, name string, args ...string) *exec.Cmd {
	full := []string{"-t", strconv.Itoa(r.pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--", "/usr/bin/env", "-i", "PATH=" + Path, "HOME=/root"}
	full = append(append(full, extra...), name)
	return exec.Command("nsenter", append(full, args...)...)
}

// Exec runs a command inside the router and returns its combined output.
func (r *Router) Exec(name string, args ...string) ([]byte, error) {
	return r.Command(nil, name, args...).CombinedOutput()
}

// Sh runs a shell line (busybox ash, /bin/sh on OpenWrt) inside the router.
func (r *Router) Sh(line string) ([]byte, error) { return r.Exec("/bin/sh", "-c", line) }

// Path is p inside the router as the host reads it (through procd's root,
// so /tmp, /var and /dev are the router's own mounts).
func (r *Router) Path(p string) string { return fmt.Sprintf("/proc/%d/root%s", r.pid, p) }

// Dial connects to addr from inside the router's network namespace (its
// uhttpd, for a browser on the host), through DialIn.
func (r *Router) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialIn(ctx, fmt.Sprintf("/proc/%d/ns/net", r.pid), network, addr)
}

// DialIn connects to addr from the network namespace at nsPath
// (/proc/PID/ns/net, /run/netns/NAME). The socket is made on a thread that
// entered the namespace and then went back to its own: a thread that ends
// instead (the runtime's way with a locked one) kills every child it once
// forked that asked for a parent-death signal, as Chromium's launcher
// does, so the thread must live on.
func DialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer own.Close()
		f, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		ch <- result{c, err}
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // back home: the thread may serve others
		}
	}()
	res := <-ch
	return res.c, res.err
}

// Forward listens on the host's loopback and relays each connection to
// addr inside the router (a browser on the host reaching its uhttpd). It
// returns the host address; the listener closes with ctx.
func (r *Router) Forward(ctx context.Context, addr string) (string, error) {
	return ForwardTo(ctx, "127.0.0.1:0", fmt.Sprintf("/proc/%d/ns/net", r.pid), addr)
}

// ForwardTo listens on listen and relays each connection to addr, dialled
// from the network namespace at nsPath (DialIn). It returns the address it
// listens on; the listener closes with ctx.
func ForwardTo(ctx context.Context, listen, nsPath, addr string) (string, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	go func() { <-ctx.Done(); l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := DialIn(ctx, nsPath, "tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				relay(c, up)
			}()
		}
	}()
	return l.Addr().String(), nil
}

// relay copies both ways until both sides are done.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// Halt shuts the router down as `poweroff` does (procd runs the init
// scripts' stop, kills what is left, and ends its namespace), and kills
// it if it is still there after 20 s.
func (r *Router) Halt() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	if r.pid > 0 {
		unix.Kill(r.pid, unix.SIGUSR2) // procd: poweroff
	}
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		if r.pid > 0 {
			unix.Kill(r.pid, unix.SIGKILL)
		}
		r.cmd.Process.Kill()
		<-r.done
	}
}
