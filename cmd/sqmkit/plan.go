package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
)

func init() {
	register(command{
		name:    "plan",
		summary: "print the ip/tc commands a start would run, with how each number was derived; touches nothing",
		run:     runPlan,
	})
}

func runPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plan", "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR` (plan a router's files on any machine)")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "sqmkit plan: one SECTION or IFACE at most, got %q\n", fs.Args())
		return 2
	}
	qs, err := config.Resolve(*root, *file, o, fs.Arg(0))
	code := badSections("plan", err, stderr)
	if err != nil && code == 0 || len(qs) == 0 {
		if code == 0 {
			fmt.Fprintf(stderr, "sqmkit plan: %v\n", err)
		}
		return 1
	}
	// Build every plan before printing any, so a bad section never leaves
	// half a script on stdout.
	var plans []*plan.Plan
	for _, q := range qs {
		f, err := linkinfo.Read(*root, q.Interface)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit plan: section %s: %v\n", q.Section, err)
			return 1
		}
		p, err := plan.Build(q, f)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit plan: section %s: %v\n", q.Section, err)
			return 1
		}
		plans = append(plans, p)
	}
	w := bufio.NewWriter(stdout)
	for i, p := range plans {
		if i > 0 {
			w.WriteString("\n")
		}
		if err := p.Write(w); err != nil {
			fmt.Fprintf(stderr, "sqmkit plan: %v\n", err)
			return 1
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "sqmkit plan: %v\n", err)
		return 1
	}
	return code
}
