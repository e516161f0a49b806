// Command sqmkit plans, applies, checks and measures Smart Queue Management.
// Each subcommand lives in its own file and registers itself in init, so the
// dispatcher stays a thin table.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	// run gets the arguments after the subcommand name and returns the exit
	// code; errors it prints itself so each command controls its own codes.
	run func(args []string) int
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func usage() {
	fmt.Fprintf(os.Stderr, "sqmkit %s: Smart Queue Management that proves itself\n\nUsage: sqmkit COMMAND [flags] [args]\n\nCommands:\n", version)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'sqmkit COMMAND -h' for the flags of a command.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage()
		return
	case "version", "-version", "--version":
		fmt.Println("sqmkit", version)
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "sqmkit: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}

// newFlagSet returns a FlagSet whose -h prints the command's summary first.
func newFlagSet(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet("sqmkit "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sqmkit %s [flags] %s\n\n%s\n\nFlags:\n", name, argsUsage, commands[name].summary)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps -h to exit 0 and bad flags to exit 2. A
// bad flag prints only the flag package's one-line error and a pointer to -h:
// forty lines of usage would bury the line that says what is wrong.
func parseFlags(fs *flag.FlagSet, args []string) (ok bool, code int) {
	full := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
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
