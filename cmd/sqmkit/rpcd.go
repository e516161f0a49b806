package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sqmkit/sqmkit/internal/rpcd"
	"github.com/sqmkit/sqmkit/internal/tc"
)

func init() {
	register(command{name: "rpcd", summary: "the backend of luci-app-sqmkit: answer rpcd's exec-plugin calls (list, call METHOD with JSON on stdin) with JSON", run: runRPCD})
}

func runRPCD(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rpcd", "list | call METHOD")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc, /sys and /var/run under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() == 1 && fs.Arg(0) == "list":
		if err := rpcd.List(stdout); err != nil {
			fmt.Fprintf(stderr, "sqmkit rpcd: %v\n", err)
			return 1
		}
		return 0
	case fs.NArg() == 2 && fs.Arg(0) == "call":
	default:
		fmt.Fprintln(stderr, "sqmkit rpcd: want `list` or `call METHOD` (rpcd runs it as /usr/libexec/rpcd/sqmkit)")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "/usr/bin/sqmkit"
	}
	e := &rpcd.Env{Root: *root, File: *file, Exe: exe, Opts: systemOptions(*root, tc.DefaultCacheDir, 30*time.Second, false, stderr)}
	if err := rpcd.Call(e, fs.Arg(1), os.Stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "sqmkit rpcd: %v\n", err)
		return 1
	}
	return 0
}
