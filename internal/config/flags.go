package config

import (
	"flag"
	"fmt"
	"slices"
)

// Overrides holds the command-line flags that override /etc/config/sqm.
// Only flags given on the command line override anything.
type Overrides struct {
	vals map[string]string // flag name -> value, checked when parsed
}

// WhereFlags are the flags that say where a queue's trees are (the device,
// the IFB, the backend that names it): all a stop uses.
var WhereFlags = []string{"interface", "ifb", "backend", "script"}

// RegisterFlags registers --download, --upload, --backend, --interface,
// --overhead, ... on fs (one per UCI option that has a flag, unless fs
// already has a flag of that name) and returns the Overrides they fill in
// when fs is parsed. When shown names any, the others are registered
// without a usage text, which the commands' -h leaves out: a start's
// command line with "stop" in its place still works.
func RegisterFlags(fs *flag.FlagSet, shown ...string) *Overrides {
	o := &Overrides{vals: map[string]string{}}
	for i := range fields {
		f := &fields[i]
		// A command's own flag of that name means something else there
		// and wins (sqmkit rate's --download is the rate to change to,
		// not the config's): defining it twice would panic.
		if f.flag == "" || fs.Lookup(f.flag) != nil {
			continue
		}
		usage := fmt.Sprintf("%s (UCI option %s, e.g. %s)", f.usage, f.opt, f.example)
		if len(shown) > 0 && !slices.Contains(shown, f.flag) {
			usage = ""
		}
		fs.Func(f.flag, usage, func(v string) error {
			// Parse into a scratch queue so a bad value fails at flag
			// parsing, naming the flag; Apply then cannot fail.
			if err := f.set(&Queue{}, v); err != nil {
				return err
			}
			o.vals[f.flag] = v
			return nil
		})
	}
	return o
}

// Interface is --interface as given, "" when it was not.
func (o *Overrides) Interface() string { return o.value("interface") }

func (o *Overrides) value(flag string) string {
	if o == nil {
		return ""
	}
	return o.vals[flag]
}

// Apply sets the fields of q whose flags were given. --script picks the
// backend and diffserv mode again, as the UCI option does, unless --backend
// or --diffserv are given too. Each override is noted in q.Notes.
func (o *Overrides) Apply(q *Queue) {
	if o == nil {
		return
	}
	for i := range fields {
		f := &fields[i]
		v, ok := o.vals[f.flag]
		if f.flag == "" || !ok {
			continue
		}
		_ = f.set(q, v) // checked in RegisterFlags' parser
		q.setOrigin(f.opt, "--"+f.flag)
		q.Notes = append(q.Notes, fmt.Sprintf("--%s %s (UCI option %s)", f.flag, v, f.opt))
		if f.opt == "script" {
			_, keep := o.vals["diffserv"]
			q.Notes = append(q.Notes, deriveBackend(q, keep))
		}
	}
}
