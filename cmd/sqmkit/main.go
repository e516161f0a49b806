// Command sqmkit plans, applies, checks and measures Smart Queue Management.
// Each subcommand lives in its own file and registers itself in init, so the
// dispatcher stays a thin table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	// run gets the arguments after the subcommand name and the streams to
	// write to, and returns the exit code; every command has this shape, so
	// each is tested the same way.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func usage(w io.Writer) {
	fmt.Fprintf(w, "sqmkit %s: Smart Queue Management that proves itself\n\nUsage: sqmkit COMMAND [flags] [args]\n\nCommands:\n", version)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'sqmkit COMMAND -h' for the flags of a command.\n")
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches args (without the program name) to a command.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "sqmkit", version)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sqmkit: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

// newFlagSet returns a FlagSet whose -h prints the command's summary first.
func newFlagSet(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet("sqmkit "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sqmkit %s [flags] %s\n\n%s\n\nFlags:\n", name, argsUsage, commands[name].summary)
		// a flag without a usage text is accepted but not shown (stop's
		// rate flags: config.RegisterFlags)
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		shown.SetOutput(fs.Output())
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue
			}
		})
		shown.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps -h to exit 0 and bad flags to exit 2. A
// bad flag prints only the flag package's one-line error and a pointer to -h:
// forty lines of usage would bury the line that says what is wrong.
func parseFlags(fs *flag.FlagSet, args []string) (ok bool, code int) {
	full := fs.Usage
	fs.Usage = func() {}
	err := parseAnywhere(fs, args)
	fs.Usage = full
	switch {
	case err == nil:
		return true, 0
	case errors.Is(err, flag.ErrHelp):
		full()
		return false, 0
	}
	fmt.Fprintf(fs.Output(), "run '%s -h' for the flags\n", fs.Name())
	return false, 2
}

// parseAnywhere parses flags before, between and after the positional
// arguments, as users type them (`sqmkit autorate wan --server S`); after
// "--" everything is an argument, however it looks (`stop --by-interface
// -- -all`, and what rpcd passes on: TestFlagsAnywhere). fs.Args() are
// the positional arguments in order.
func parseAnywhere(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" || len(rest) == 0 {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// stopSignals is cancelled by ^C, SIGTERM (procd, systemd) and SIGHUP (the
// SSH session that started the command dropped): each ends a long command
// the same way, with its rates restored (TestAutorateSIGHUPRestores).
func stopSignals() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}
