// Command tcshim is a LAB-ONLY stand-in for tc. It lets sqmkit's NSS plans run
// on kernels without the Qualcomm NSS qdiscs: it rewrites nsstbl to tbf,
// nssfq_codel to fq_codel and nssmirred to mirred, runs the real tc, and maps
// `qdisc show` output back to the NSS names. With SQMKIT_SHIM_FQ_CODEL=pfifo
// it also turns fq_codel into pfifo for kernels without sch_fq_codel (the
// test host). Never install it on a router: it only imitates the syntax.
//
// Usage: put it first on PATH under the name tc.
//
//	SQMKIT_REAL_TC   the real tc (default /usr/sbin/tc, else /sbin/tc)
//	SQMKIT_SHIM_FQ_CODEL=pfifo   map fq_codel and nssfq_codel to pfifo
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/sqmkit/sqmkit/internal/tc"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-shim-help" || os.Args[1] == "--shim-help") {
		fmt.Fprintln(os.Stderr, "tcshim: lab-only tc stand-in that maps NSS qdiscs onto tbf/fq_codel/mirred; see the package comment")
		return
	}
	fqPfifo := os.Getenv("SQMKIT_SHIM_FQ_CODEL") == "pfifo"
	opts, rest := splitOptions(os.Args[1:])
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
		go func() { pw.CloseWithError(rewriteStream(src, pw, fqPfifo)) }()
		stdin = pr
	} else {
		rest = rewrite(rest, fqPfifo)
	}
	cmd := exec.Command(realTC(), append(opts, rest...)...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
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
	if _, err := os.Stat("/usr/sbin/tc"); err == nil {
		return "/usr/sbin/tc"
	}
	return "/sbin/tc"
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
func rewriteStream(in io.Reader, out io.Writer, fqPfifo bool) error {
	br := bufio.NewReader(in)
	for {
		l, err := br.ReadString('\n')
		if l != "" {
			argv, serr := tc.Split(l)
			if serr != nil {
				return serr
			}
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
