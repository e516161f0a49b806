// Command tcshim is a TEST- AND LAB-ONLY stand-in for tc. It lets sqmkit's NSS plans run
// on kernels without the Qualcomm NSS qdiscs: it rewrites nsstbl to tbf,
// nssfq_codel to fq_codel and nssmirred to mirred, runs the real tc, and maps
// `qdisc show` output back to the NSS names. With SQMKIT_SHIM_FQ_CODEL=pfifo
// it also turns fq_codel into pfifo for kernels without sch_fq_codel (the
// test host), and keeps that pfifo's limit across tbf changes (fifoGuard).
// Never install it on a router: it only imitates the syntax.
//
// Usage: put it first on PATH under the name tc.
//
//	SQMKIT_REAL_TC   the real tc (default /usr/sbin/tc, else /sbin/tc, never itself)
//	SQMKIT_SHIM_FQ_CODEL=pfifo   map fq_codel and nssfq_codel to pfifo
//
// Where no environment reaches it (procd's services on the real OpenWrt
// stack), the lines KEY=VALUE of the file beside it named like it plus
// ".env" set the variables the environment leaves unset.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/sqmkit/sqmkit/internal/tc"
)

func main() {
	loadEnvFile()
	if len(os.Args) > 1 && (os.Args[1] == "-shim-help" || os.Args[1] == "--shim-help") {
		fmt.Fprintln(os.Stderr, "tcshim: lab-only tc stand-in that maps NSS qdiscs onto tbf/fq_codel/mirred; see the package comment")
		return
	}
	fqPfifo := os.Getenv("SQMKIT_SHIM_FQ_CODEL") == "pfifo"
	opts, rest := splitOptions(os.Args[1:])
	var guard *fifoGuard
	if fqPfifo {
		guard = newFifoGuard(opts)
	}
	var stdin io.Reader = os.Stdin
	if i := batchIndex(opts); i >= 0 {
		// line by line, as tc reads a batch: a long-lived `tc -batch -`
		// (autorate's) gets each line run as it arrives
		src := io.Reader(os.Stdin)
		if opts[i+1] != "-" {
			f, err := os.Open(opts[i+1])
			if err != nil {
				fmt.Fprintln(os.Stderr, "tcshim:", err)
				os.Exit(1)
			}
			src = f
		}
		opts[i+1] = "-"
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(rewriteStream(src, pw, fqPfifo, guard.see)) }()
		stdin = pr
	} else {
		guard.see(rest)
		rest = rewrite(rest, fqPfifo)
	}
	cmd := exec.Command(realTC(), append(opts, rest...)...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
	guard.restore()
	os.Stdout.WriteString(mapShow(out.String()))
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "tcshim:", err)
		os.Exit(1)
	}
}

func realTC() string {
	if p := os.Getenv("SQMKIT_REAL_TC"); p != "" {
		return p
	}
	self, _ := os.Stat("/proc/self/exe")
	for _, p := range []string{"/usr/sbin/tc", "/sbin/tc"} {
		if st, err := os.Stat(p); err == nil && (self == nil || !os.SameFile(st, self)) {
			return p
		}
	}
	return "/sbin/tc"
}

// loadEnvFile sets, from the file EXE.env beside the shim, the variables
// the environment leaves unset.
func loadEnvFile() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	b, err := os.ReadFile(exe + ".env")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if _, set := os.LookupEnv(k); ok && !set {
			os.Setenv(k, v)
		}
	}
}

// splitOptions separates tc's leading options from the command.
func splitOptions(args []string) (opts, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return args[:i:i], args[i:]
		}
		if (a == "-batch" || a == "-b") && i+1 < len(args) {
			i++
		}
	}
	return args, nil
}

func batchIndex(opts []string) int {
	for i, o := range opts {
		if (o == "-batch" || o == "-b") && i+1 < len(opts) {
			return i
		}
	}
	return -1
}

// rewriteStream rewrites every line as it arrives and keeps the line
// count, so tc's "Command failed -:N" still names the caller's line.
func rewriteStream(in io.Reader, out io.Writer, fqPfifo bool, see func([]string)) error {
	br := bufio.NewReader(in)
	for {
		l, err := br.ReadString('\n')
		if l != "" {
			argv, serr := tc.Split(l)
			if serr != nil {
				return serr
			}
			see(argv)
			text, serr := tc.Render([][]string{rewrite(argv, fqPfifo)})
			if serr != nil {
				return serr
			}
			if _, werr := io.WriteString(out, text); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fifoGuard keeps the pfifo that stands in for nssfq_codel at its own
// limit. The kernel sets a fifo child's limit to its tbf parent's on every
// tbf change (fifo_set_limit), where nsstbl's child, no fifo, keeps its
// own: a rate change (sqmkit rate) left the stand-in at 100000p and the
// tree off its plan. Only with SQMKIT_SHIM_FQ_CODEL=pfifo (the test host).
type fifoGuard struct {
	opts     []string          // tc's options (-n NETNS and the like)
	before   map[string]string // "dev D parent P handle H" -> limit
	mu       sync.Mutex
	tbf, own bool // a tbf change ran; a line set a fifo itself
}

// newFifoGuard keeps tc's options but its batch (-batch FILE, -force):
// its own commands are one-off.
func newFifoGuard(opts []string) *fifoGuard {
	var keep []string
	for i := 0; i < len(opts); i++ {
		switch opts[i] {
		case "-batch", "-b":
			i++
		case "-force", "-f":
		default:
			keep = append(keep, opts[i])
		}
	}
	return &fifoGuard{opts: keep, before: fifoLimits(keep)}
}

// see notes what a command (before its rewrite) changes.
func (g *fifoGuard) see(argv []string) {
	if g == nil || len(argv) < 2 || argv[0] != "qdisc" {
		return
	}
	k := kindAt(argv)
	if k < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch argv[k] {
	case "nsstbl", "tbf":
		g.tbf = g.tbf || argv[1] == "change" || argv[1] == "replace"
	case "nssfq_codel", "fq_codel", "pfifo":
		g.own = true
	}
}

// restore puts back every fifo limit a tbf change moved.
func (g *fifoGuard) restore() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.tbf || g.own {
		return
	}
	for key, limit := range fifoLimits(g.opts) {
		if was, ok := g.before[key]; ok && was != limit {
			args := append(append(slices.Clone(g.opts), "qdisc", "change"), strings.Fields(key)...)
			if out, err := exec.Command(realTC(), append(args, "pfifo", "limit", strings.TrimSuffix(was, "p"))...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "tcshim: putting back the pfifo limit of %s: %v %s\n", key, err, out)
			}
		}
	}
}

// fifoLimits reads every pfifo's limit from the real tc.
func fifoLimits(opts []string) map[string]string {
	out, _ := exec.Command(realTC(), append(slices.Clone(opts), "qdisc", "show")...).Output()
	m := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		// qdisc pfifo 10: dev wan parent 1: limit 200p
		if len(f) >= 9 && f[1] == "pfifo" && f[3] == "dev" && f[5] == "parent" && f[7] == "limit" {
			m["dev "+f[4]+" parent "+f[6]+" handle "+f[2]] = f[8]
		}
	}
	return m
}
