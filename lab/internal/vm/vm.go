// Package vm boots the lab's guest: the Debian kernel under QEMU's software
// emulation (KVM hangs on these machines), the host's root filesystem
// read-only over 9p and one writable 9p export for results.
package vm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/initramfs"
)

// Config is one guest boot.
type Config struct {
	Kernel, Initrd string
	// Modules is the kernel's module directory when it is not the host's
	// /lib/modules/RELEASE (a kernel scripts/kernels.sh fetched): the guest
	// finds it there. Path is a directory put first in the guest's PATH.
	Modules, Path string
	// Results is the host directory exported writable; the guest mounts it
	// at the same path so both sides name files alike.
	Results string
	Cmd     []string // run in the guest after switch_root
	Console string   // file that receives the whole serial console
	Timeout time.Duration
	// Out receives console lines that are not kernel messages.
	Out io.Writer
	// Watch, when set, runs beside qemu with its pid until ctx ends with
	// the guest; Run returns after it did, so nothing it started outlives
	// the guest.
	Watch func(ctx context.Context, pid int)
	// Forward, when not 0, gives the guest a user-mode network device
	// whose only way in is the host's 127.0.0.1:Forward, forwarded to the
	// guest's port ForwardTo (restrict=on: the guest reaches nothing).
	Forward, ForwardTo int
}

// kernelLine matches printk lines ("[    4.451234] ..."); iperf3's "[SUM]"
// and "[  5]" lines start with '[' too, so match the timestamp.
var kernelLine = regexp.MustCompile(`^\[\s*\d+\.\d+\] `)

// IsKernelLine reports whether a console line came from the kernel log.
func IsKernelLine(s string) bool { return kernelLine.MatchString(s) }

// KernelText is a console line without its printk timestamp.
func KernelText(s string) string { return kernelLine.ReplaceAllString(s, "") }

// terminalControl matches what the guest's firmware and kernel send to a
// terminal: ESC c (reset), CSI sequences (ESC [ ... letter: clear, modes),
// and the rest of the escapes and control bytes.
var terminalControl = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[@-~])|[\x00-\x08\x0b-\x1f\x7f]`)

// CleanLine is a console line without terminal control sequences.
func CleanLine(s string) string { return terminalControl.ReplaceAllString(s, "") }

// FindKernel picks the newest Debian amd64 guest kernel in /boot and the
// directory of its modules.
func FindKernel() (kernel, modDir string, err error) {
	m, _ := filepath.Glob("/boot/vmlinuz-*-amd64")
	for i := len(m) - 1; i >= 0; i-- {
		rel := strings.TrimPrefix(filepath.Base(m[i]), "vmlinuz-")
		dir := filepath.Join("/lib/modules", rel)
		if _, err := os.Stat(filepath.Join(dir, "kernel/net/sched/sch_cake.ko")); err == nil {
			return m[i], dir, nil
		}
	}
	return "", "", fmt.Errorf("no guest kernel with sch_cake in /boot/vmlinuz-*-amd64 (install linux-image-amd64)")
}

// Args returns the qemu-system-x86_64 arguments for c.
func Args(c Config) ([]string, error) {
	for _, a := range append([]string{c.Results, c.Modules, c.Path}, c.Cmd...) {
		if strings.ContainsAny(a, " :\"'\t\n") {
			return nil, fmt.Errorf("guest command argument %q: the kernel command line carries it, so no spaces, quotes or colons", a)
		}
	}
	// clocksource=tsc tsc=reliable: without them the emulated guest finds
	// its TSC unstable and reads time from the HPET, and every clock read
	// (each packet's timestamp, each Go scheduler tick; the vDSO cannot
	// read an HPET) becomes an emulated MMIO access under QEMU's global
	// lock. Measured in the guest: a clock_gettime syscall per read, and
	// vCPUs stalled for up to 1.8 s under load on a quiet host. TCG's rdtsc
	// reads the host's invariant TSC, which is stable.
	appendLine := fmt.Sprintf("console=ttyS0 panic=-1 edd=off quiet clocksource=tsc tsc=reliable labresults=%s labcmd=%s",
		c.Results, strings.Join(c.Cmd, ":"))
	if c.Modules != "" {
		appendLine += " labmods=" + c.Modules
	}
	if c.Path != "" {
		appendLine += " labpath=" + c.Path
	}
	nic := []string{"-nic", "none"}
	if c.Forward > 0 {
		nic = []string{"-netdev", fmt.Sprintf("user,id=lab,restrict=on,hostfwd=tcp:127.0.0.1:%d-:%d", c.Forward, c.ForwardTo),
			"-device", "virtio-net-pci,netdev=lab"}
	}
	return append([]string{
		// debug-threads names the vCPU threads ("CPU 0/TCG"), so the host
		// can read their scheduling delay (lab/internal/noise)
		"-name", "sqmkit-lab,debug-threads=on",
		"-accel", "tcg,thread=multi", "-smp", "2", "-m", "2G",
		"-kernel", c.Kernel, "-initrd", c.Initrd, "-append", appendLine,
		"-no-reboot", "-nographic"}, append(nic,
		"-virtfs", "local,path=/,mount_tag="+initramfs.TagRoot+",security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+c.Results+",mount_tag="+initramfs.TagResults+",security_model=none,multidevs=remap",
	)...), nil
}

// priority is qemu's nice and its autogroup's nice.
const priority = -10

// Run boots the guest and returns when it powers off, or kills it at the
// timeout.
func Run(ctx context.Context, c Config) error {
	args, err := Args(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	log, err := os.Create(c.Console)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdin = nil
	// Its own session gives qemu its own scheduler autogroup (see below).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("qemu: %w (install qemu-system-x86)", err)
	}
	// The emulated CPU is the lab's clock: when other work on the host
	// preempts it, latency samples grow spikes (both directions at once,
	// goodput dips) that no qdisc caused. With autogroup scheduling (the
	// Debian default) a process's nice only ranks it inside its session's
	// group and every session's group gets an equal share, so `go test` in
	// another terminal halves qemu whatever qemu's nice; the group's own
	// nice is what counts. Best effort (needs root), errors ignored.
	syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, priority)
	os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", cmd.Process.Pid), []byte(fmt.Sprint(priority)), 0)
	watchCtx, guestGone := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if c.Watch != nil {
			c.Watch(watchCtx, cmd.Process.Pid)
		}
	}()
	defer func() { guestGone(); <-watched }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			fmt.Fprintln(log, line)
			// the firmware's terminal resets (ESC c, ESC[2J) would wipe what
			// the terminal showed above (TestCleanLine)
			line = CleanLine(line)
			if c.Out != nil && !IsKernelLine(line) && line != "" {
				fmt.Fprintln(c.Out, line)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err = cmd.Wait()
	pw.Close()
	<-done
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("guest did not finish within %v (console: %s)", c.Timeout, c.Console)
	}
	if err != nil {
		return fmt.Errorf("qemu: %w (console: %s)", err, c.Console)
	}
	return nil
}
