package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
	"github.com/sqmkit/sqmkit/internal/uci"
)

// ErrNoneEnabled is returned (wrapped) by Select when no argument names a
// queue and no queue is enabled; stop and status may treat it as "nothing
// to do".
var ErrNoneEnabled = errors.New("no enabled queue")

// Path returns the SQM file Load reads: file when set, else
// <root>/etc/config/sqm.
func Path(root, file string) string {
	if file != "" {
		return file
	}
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "etc", "config", "sqm")
}

// Load reads every `queue` section of the SQM file (see Path), in file
// order, with sqm-scripts' defaults for absent options. Values are checked
// for syntax (numbers, ECN, booleans, script names); Validate checks the
// rest once flags are applied. A section whose options are wrong is
// returned with its Err set, the others as they are: as sqm-scripts
// reads them, one section's mistake stops that section alone
// (TestBadSectionAlone). Only a file that does not parse is an error.
func Load(root, file string) ([]Queue, error) {
	path := Path(root, file)
	f, _, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var qs []Queue
	for _, s := range f.Sections {
		if s.Type != "queue" {
			continue
		}
		qs = append(qs, fromSection(path, s))
	}
	return qs, nil
}

// BadSections are selected queues refused for their own mistakes, each
// error naming its line and fix; Resolve returns the other queues beside
// it, which may run.
type BadSections struct {
	Sections []string
	Errs     []error
}

func (b *BadSections) Error() string {
	lines := make([]string, len(b.Errs))
	for i, e := range b.Errs {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (b *BadSections) Unwrap() []error { return b.Errs }

func (b *BadSections) add(q Queue, err error) {
	b.Sections = append(b.Sections, q.Section)
	b.Errs = append(b.Errs, err)
}

// readFile reads and parses the SQM file at path; data is its text.
func readFile(path string) (f *uci.File, data []byte, err error) {
	data, err = sizelimit.ReadFile(path, sizelimit.UCI, "UCI config file")
	if err != nil {
		return nil, nil, fmt.Errorf("read SQM config: %w", err)
	}
	f, err = uci.Parse(path, data)
	return f, data, err
}

// newQueue returns a queue with sqm-scripts' defaults: disabled, ECN on
// ingress only, no link layer adaptation.
func newQueue(section string) Queue {
	return Queue{Section: section, IngressECN: true, LinkLayer: LinkNone}
}

// fromSection reads one section; every option is read, so a mistake in
// one leaves the others (enabled above all) as written, and the first
// mistake is the queue's Err.
func fromSection(path string, s *uci.Section) Queue {
	q := newQueue(s.Name)
	q.setOrigin(sectionOrigin, fmt.Sprintf("%s:%d", path, s.Line))
	for _, o := range s.Options {
		f := fieldFor(o.Name)
		if f == nil {
			continue // LuCI and other tools keep their own options here
		}
		where := fmt.Sprintf("%s:%d", path, o.Line)
		// a list reads as its values joined by spaces, as sqm-scripts'
		// config_get gives it (list eqdisc_opts 'interval 50ms' ...)
		v := strings.Join(o.Values, " ")
		if err := f.set(&q, v); err != nil {
			if q.Err == nil {
				q.Err = &FieldError{Origin: where, Section: s.Name, Option: o.Name, Value: v, Why: err.Error(), Fix: fixFor(o.Name)}
			}
			continue
		}
		q.setOrigin(o.Name, where)
	}
	if _, ok := s.Get("backend"); ok {
		q.Notes = append(q.Notes, fmt.Sprintf("backend=%s (option backend)", q.Backend))
	} else {
		_, keep := s.Get("diffserv")
		q.Notes = append(q.Notes, deriveBackend(&q, keep))
	}
	return q
}

// Select picks the queues a command acts on: with arg "", every enabled
// queue; otherwise those whose section name or interface is arg, or the
// queue @queue[N] (libuci's index syntax; negative counts from the end).
// A queue named explicitly is selected even when disabled.
func Select(qs []Queue, arg string) ([]Queue, error) {
	var out []Queue
	if arg == "" {
		for _, q := range qs {
			if q.Enabled {
				out = append(out, q)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w (fix: set option enabled '1' in a queue section, or name one of: %s)", ErrNoneEnabled, available(qs))
		}
		return out, onePerInterface(out)
	}
	if idx, ok := queueIndex(arg); ok {
		if idx < 0 {
			idx += len(qs)
		}
		if idx >= 0 && idx < len(qs) {
			return []Queue{qs[idx]}, nil
		}
	}
	var enabled []Queue
	for _, q := range qs {
		if q.Section == arg {
			return []Queue{q}, nil
		}
		if q.Interface == arg {
			out = append(out, q)
			if q.Enabled {
				enabled = append(enabled, q)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no queue section or interface %q (fix: name one of: %s)", arg, available(qs))
	}
	// An interface stands for its enabled queue when it has one, as
	// sqm-scripts runs a device's enabled section.
	if len(enabled) > 0 {
		return enabled, onePerInterface(enabled)
	}
	return out, nil
}

// onePerInterface refuses two enabled queues on one device: applied in
// turn, the last would silently replace the first.
func onePerInterface(qs []Queue) error {
	for i, a := range qs {
		for _, b := range qs[i+1:] {
			if a.Interface == b.Interface {
				return fmt.Errorf("sections %s (%s) and %s (%s) are both enabled for interface %s, and one device takes one queue (fix: set option enabled '0' in one of them)",
					a.Section, a.Origin(sectionOrigin), b.Section, b.Origin(sectionOrigin), a.Interface)
			}
		}
	}
	return nil
}

func queueIndex(arg string) (int, bool) {
	rest, ok := strings.CutPrefix(arg, "@queue[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	return n, err == nil
}

func available(qs []Queue) string {
	if len(qs) == 0 {
		return "(the file has no queue sections)"
	}
	var names []string
	for _, q := range qs {
		state := "disabled"
		if q.Enabled {
			state = "enabled"
		}
		names = append(names, fmt.Sprintf("%s (interface %s, %s)", q.Section, q.Interface, state))
	}
	return strings.Join(names, ", ")
}

// Resolve is what a command needs: Load, Select by arg, apply the flags
// (o may be nil) and Validate every selected queue. When the default SQM
// file does not exist (a plain Linux box), it returns a single enabled queue
// built from the flags alone, on --interface or else the device named by
// arg.
func Resolve(root, file string, o *Overrides, arg string) ([]Queue, error) {
	return resolve(root, file, o, arg, Select)
}

// ResolveInterface is Resolve for sqm-scripts' calling convention (the
// .qos scripts): iface is the queue's interface, never a section name, and
// it selects the enabled queue on iface whose script is script (any script
// when ""). Two such queues are ambiguous and refused: sqm-scripts itself
// would run the first and record it under the interface alone.
func ResolveInterface(root, file string, o *Overrides, iface, script string) ([]Queue, error) {
	return resolve(root, file, o, iface, func(qs []Queue, iface string) ([]Queue, error) {
		var out []Queue
		for _, q := range qs {
			if q.Enabled && q.Interface == iface && (script == "" || q.Script == script) {
				out = append(out, q)
			}
		}
		switch len(out) {
		case 0:
			return nil, fmt.Errorf("no enabled queue on interface %q with script %q (fix: name one of: %s)", iface, script, available(qs))
		case 1:
			return out, nil
		}
		return nil, onePerInterface(out)
	})
}

func resolve(root, file string, o *Overrides, arg string, sel func([]Queue, string) ([]Queue, error)) ([]Queue, error) {
	qs, err := Load(root, file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && file == "":
		iface := o.value("interface")
		if iface == "" {
			iface = arg
		}
		if iface == "" {
			return nil, fmt.Errorf("%s does not exist and no interface was given (fix: pass --interface eth0 --download 95000 --upload 9500, or create the file)", Path(root, ""))
		}
		if arg != "" && arg != iface {
			return nil, fmt.Errorf("%s does not exist, so the only queue is --interface %s, not %q (fix: drop the argument)", Path(root, ""), iface, arg)
		}
		q := newQueue(iface)
		q.Enabled = true
		q.Interface = iface
		q.Notes = append(q.Notes, fmt.Sprintf("%s absent: queue from flags only", Path(root, "")), deriveBackend(&q, false))
		qs = []Queue{q}
	case err != nil:
		return nil, err
	default:
		if qs, err = sel(qs, arg); err != nil {
			return nil, fmt.Errorf("%s: %w", Path(root, file), err)
		}
	}
	var good []Queue
	bad := &BadSections{}
	for _, q := range qs {
		if q.Err != nil {
			bad.add(q, q.Err)
			continue
		}
		o.Apply(&q)
		if err := q.Validate(); err != nil {
			bad.add(q, err)
			continue
		}
		good = append(good, q)
	}
	if len(bad.Errs) > 0 {
		return good, bad
	}
	return good, nil
}

// Expected returns the queues that say what the devices in args should
// hold, for a reader such as the doctor that also judges devices no queue
// names. Each arg selects as Select does (section, interface, @queue[N]);
// an arg that selects nothing is a bare device and expects nothing. With
// no args, the enabled queues. Without the default SQM file, the flags
// alone describe one queue (--interface ...), or nothing. The flags are
// applied; validation is left to the caller, which still judges the
// devices of a queue it cannot plan.
func Expected(root, file string, o *Overrides, args []string) ([]Queue, error) {
	all, err := Load(root, file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && file == "":
		qs, err := Resolve(root, "", o, "")
		if err != nil {
			return nil, nil // no config and no usable --interface: judge what the kernel holds
		}
		return qs, nil
	case err != nil:
		return nil, err
	}
	var qs []Queue
	if len(args) == 0 {
		if qs, err = Select(all, ""); errors.Is(err, ErrNoneEnabled) {
			return nil, nil
		}
	}
	for _, a := range args {
		sel, _ := Select(all, a)
		for _, q := range sel {
			if !slices.ContainsFunc(qs, func(x Queue) bool { return x.Section == q.Section }) {
				qs = append(qs, q)
			}
		}
	}
	for i := range qs {
		o.Apply(&qs[i])
	}
	return qs, nil
}
