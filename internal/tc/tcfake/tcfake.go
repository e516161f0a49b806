// Package tcfake is a simulated kernel for tests. It runs the tc and ip batch
// lines sqmkit writes against an in-memory model of devices, qdiscs, classes
// and filters, with iproute2's batch semantics (stop at the first refused
// line; with -force, run every line and report each refusal), and lets a
// test refuse any line, make tc die mid-batch without naming a line, make a
// program missing, or remove a device between batches. Read renders the
// model as tc's text and parses it with tcstats, so the code under test sees
// what it would read from a real kernel. It checks what a kernel checks
// (devices exist, a root is exclusive, a parent exists, a redirect's target
// exists), not every option's syntax: that is the probe's job.
package tcfake

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Kernel is the simulated system. The zero value has no devices.
type Kernel struct {
	mu        sync.Mutex
	devs      []*Dev
	lastIndex int
	Calls     []Call // every batch, in order
	Reads     int    // Read calls
	// Fault, when set, is asked before each line runs.
	Fault func(Line) Fault
	// Before, when set, runs before batch number n (0-based) executes.
	Before func(k *Kernel, n int)
	// NoCakeMQ simulates a kernel or tc without cake_mq (before 7.0).
	NoCakeMQ bool
}

// Call is one batch as it was run.
type Call struct {
	Prog  string
	Force bool
	Lines [][]string
}

// Line identifies one line about to run: batch n (0-based, over all
// batches), line i (1-based, as tc counts).
type Line struct {
	Call int
	Prog string
	I    int
	Argv []string
}

// Fault is what happens to a line.
type Fault int

const (
	Run     Fault = iota // run it as the kernel would
	Refuse               // refuse it: "Error: injected failure."
	Die                  // tc exits without numbering the line; later lines never run
	Missing              // the program is not installed: the batch does not run at all
)

// Dev is one network device.
type Dev struct {
	Name     string
	Up       bool
	Routable bool
	Kind     string // "ifb" for what `ip link add ... type ifb` made; "" otherwise
	Index    int
	TXQueues int // 1 unless set, or created with numtxqueues
	Alias    string
	qdiscs   []*qdisc
	classes  []*class
	filters  []*filter
}

type qdisc struct {
	kind, handle, parent string // parent: "root", "ingress" or a class/qdisc handle
	opts, stab           []string
}

type class struct {
	kind, id, parent string
	opts             []string
}

type filter struct {
	parent, kind, action, to string
	pref                     string
}

// AddDevice creates a device (up), as `ip link add` + `ip link set up` would.
func (k *Kernel) AddDevice(name string, routable bool) *Dev {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := &Dev{Name: name, Up: true, Routable: routable, Index: k.nextIndex(), TXQueues: 1}
	k.devs = append(k.devs, d)
	return d
}

// SetTXQueues gives a device n TX queues, as its driver would.
func (k *Kernel) SetTXQueues(name string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if d := k.dev(name); d != nil {
		d.TXQueues = n
	}
}

// RemoveDevice deletes a device and everything on it, as a PPPoE reconnect
// deletes pppoe-wan.
func (k *Kernel) RemoveDevice(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.devs = slices.DeleteFunc(k.devs, func(d *Dev) bool { return d.Name == name })
}

func (k *Kernel) dev(name string) *Dev {
	for _, d := range k.devs {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Exists reports a device.
func (k *Kernel) Exists(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dev(name) != nil
}

// Procs counts the processes a real kernel would have run for the batches.
func (k *Kernel) Procs() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.Calls)
}

var errExit = errors.New("exit status 1")

// Batch runs lines with iproute2's batch semantics.
func (k *Kernel) Batch(prog string, force bool, lines [][]string) ([]string, error) {
	if _, err := tc.Render(lines); err != nil {
		return nil, err // what tc.Runner refuses before starting a process
	}
	k.mu.Lock()
	n := len(k.Calls)
	k.Calls = append(k.Calls, Call{Prog: prog, Force: force, Lines: lines})
	before := k.Before
	k.mu.Unlock()
	if before != nil {
		before(k, n)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var fails []tc.Failure
	for i, argv := range lines {
		f := Run
		if k.Fault != nil {
			f = k.Fault(Line{Call: n, Prog: prog, I: i + 1, Argv: argv})
		}
		switch f {
		case Missing:
			return nil, fmt.Errorf("%s: exec: %q: executable file not found in $PATH", prog, prog)
		case Die:
			fails = append(fails, tc.Failure{Msg: "Bad action type (injected)"})
			return nil, &tc.BatchError{Prog: prog, Lines: lines, Failures: fails, Err: errExit}
		}
		err := errors.New("Error: injected failure.")
		if f == Run {
			err = k.exec(prog, argv)
		}
		if err == nil {
			continue
		}
		fails = append(fails, tc.Failure{Line: i + 1, Msg: err.Error()})
		if !force {
			break
		}
	}
	if len(fails) > 0 {
		return nil, &tc.BatchError{Prog: prog, Lines: lines, Failures: fails, Err: errExit}
	}
	return nil, nil
}

func (k *Kernel) exec(prog string, argv []string) error {
	if prog == "ip" {
		return k.ip(argv)
	}
	if len(argv) < 4 || argv[2] != "dev" {
		return fmt.Errorf("tcfake: unsupported line %q", strings.Join(argv, " "))
	}
	d := k.dev(argv[3])
	if d == nil {
		return fmt.Errorf("Cannot find device %q", argv[3])
	}
	switch argv[0] + " " + argv[1] {
	case "qdisc add":
		return d.addQdisc(argv[4:], k.has)
	case "qdisc del":
		return d.delQdisc(argv[4:])
	case "qdisc change", "qdisc replace":
		return d.changeQdisc(argv[4:], argv[1] == "replace", k.has)
	case "class add", "class change":
		return d.setClass(argv[4:], argv[1] == "add")
	case "filter add":
		return k.addFilter(d, argv[4:])
	}
	return fmt.Errorf("tcfake: unsupported line %q", strings.Join(argv, " "))
}

func (k *Kernel) ip(argv []string) error {
	switch {
	case len(argv) == 6 && argv[0] == "link" && argv[1] == "add" && argv[5] == "ifb",
		len(argv) == 8 && argv[0] == "link" && argv[1] == "add" && argv[4] == "numtxqueues" && argv[7] == "ifb":
		if k.dev(argv[3]) != nil {
			return errors.New("RTNETLINK answers: File exists")
		}
		n := 1
		if len(argv) == 8 {
			var err error
			if n, err = strconv.Atoi(argv[5]); err != nil || n < 1 {
				return fmt.Errorf("Error: argument %q is wrong: invalid value", argv[5])
			}
		}
		k.devs = append(k.devs, &Dev{Name: argv[3], Kind: "ifb", Index: k.nextIndex(), TXQueues: n})
	case len(argv) == 5 && argv[0] == "link" && argv[1] == "set" && argv[4] == "up",
		len(argv) == 7 && argv[0] == "link" && argv[1] == "set" && argv[4] == "alias" && argv[6] == "up":
		d := k.dev(argv[3])
		if d == nil {
			return fmt.Errorf("Cannot find device %q", argv[3])
		}
		d.Up = true
		if len(argv) == 7 {
			d.Alias = argv[5]
		}
	case len(argv) == 5 && argv[0] == "link" && argv[1] == "set" && argv[4] == "down":
		d := k.dev(argv[3])
		if d == nil {
			return fmt.Errorf("Cannot find device %q", argv[3])
		}
		d.Up = false
	case len(argv) == 4 && argv[0] == "link" && argv[1] == "del":
		if k.dev(argv[3]) == nil {
			return fmt.Errorf("Cannot find device %q", argv[3])
		}
		k.devs = slices.DeleteFunc(k.devs, func(d *Dev) bool { return d.Name == argv[3] })
	default:
		return fmt.Errorf("tcfake: unsupported ip line %q", strings.Join(argv, " "))
	}
	return nil
}

// kinds are the qdiscs this kernel has.
var kinds = map[string]bool{"htb": true, "fq_codel": true, "cake": true, "cake_mq": true, "nsstbl": true, "nssfq_codel": true,
	"ingress": true, "tbf": true, "pfifo": true}

func (k *Kernel) has(kind string) bool { return kinds[kind] && !(kind == "cake_mq" && k.NoCakeMQ) }

// place parses "root | parent P | handle H" and an optional stab, up to the kind.
func place(args []string) (parent, handle string, stab, rest []string) {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "root":
			parent = "root"
		case "parent", "handle":
			if i+1 < len(args) {
				if args[i] == "parent" {
					parent = args[i+1]
				} else {
					handle = args[i+1]
				}
				i++
			}
		case "stab":
			for i+2 < len(args) && strings.Contains(" mtu tsize mpu overhead linklayer ", " "+args[i+1]+" ") {
				stab = append(stab, args[i+1], args[i+2])
				i += 2
			}
		default:
			return parent, handle, stab, args[i:]
		}
	}
	return parent, handle, stab, nil
}

func (d *Dev) addQdisc(args []string, has func(string) bool) error {
	parent, handle, stab, rest := place(args)
	if len(rest) == 0 {
		return errors.New("Error: qdisc kind is missing")
	}
	kind := rest[0]
	if !has(kind) {
		return errors.New("Error: Specified qdisc kind is unknown.")
	}
	if kind == "cake_mq" && (d.TXQueues < 2 || parent != "root" || slices.Contains(rest, "autorate-ingress")) {
		return errors.New("Error: cake_mq needs a multi-queue device, the root, and no autorate-ingress.")
	}
	if kind == "ingress" {
		parent = tcstats.Ingress
	}
	if d.find(parent) != nil && (parent == "root" || parent == tcstats.Ingress) {
		return errors.New("Error: Exclusivity flag on, cannot modify.")
	}
	if parent != "root" && parent != tcstats.Ingress && !d.hasParent(parent) {
		return errors.New("Error: Failed to find specified class.")
	}
	if handle != "" && slices.ContainsFunc(d.qdiscs, func(q *qdisc) bool { return q.handle == handle }) {
		return errors.New("Error: Exclusivity flag on, cannot modify.")
	}
	d.qdiscs = append(d.qdiscs, &qdisc{kind: kind, handle: handle, parent: parent, opts: rest[1:], stab: stab})
	if kind == "cake_mq" {
		// one cake per TX queue under the root, configured through it
		for i := range d.TXQueues {
			d.qdiscs = append(d.qdiscs, &qdisc{kind: "cake", handle: "0:", parent: fmt.Sprintf("%s%d", handle, i+1), opts: rest[1:]})
		}
	}
	return nil
}

// find returns the qdisc attached at parent ("root", "ingress" or a handle).
func (d *Dev) find(parent string) *qdisc {
	for _, q := range d.qdiscs {
		if q.parent == parent {
			return q
		}
	}
	return nil
}

func (d *Dev) hasParent(p string) bool {
	return slices.ContainsFunc(d.classes, func(c *class) bool { return c.id == p }) ||
		slices.ContainsFunc(d.qdiscs, func(q *qdisc) bool { return q.handle == p })
}

func (d *Dev) delQdisc(args []string) error {
	if len(args) != 1 || args[0] != "root" && args[0] != "ingress" {
		return fmt.Errorf("tcfake: unsupported qdisc del %q", args)
	}
	hook := args[0]
	if hook == "ingress" {
		hook = tcstats.Ingress
	}
	if d.find(hook) == nil {
		return errors.New("Error: Cannot find specified qdisc on specified device.")
	}
	if hook == tcstats.Ingress {
		d.qdiscs = slices.DeleteFunc(d.qdiscs, func(q *qdisc) bool { return q.parent == tcstats.Ingress })
		d.filters = slices.DeleteFunc(d.filters, func(f *filter) bool { return f.parent == tcstats.Ingress })
		return nil
	}
	d.qdiscs = slices.DeleteFunc(d.qdiscs, func(q *qdisc) bool { return q.parent != tcstats.Ingress })
	d.classes = nil
	d.filters = slices.DeleteFunc(d.filters, func(f *filter) bool { return f.parent != tcstats.Ingress })
	return nil
}

func (d *Dev) changeQdisc(args []string, replace bool, has func(string) bool) error {
	parent, handle, _, rest := place(args)
	var q *qdisc
	for _, x := range d.qdiscs {
		if parent != "" && x.parent == parent || handle != "" && x.handle == handle && parent == "" {
			q = x
		}
	}
	switch {
	case q == nil && replace:
		return d.addQdisc(args, has)
	case q == nil:
		return errors.New("Error: Specified qdisc not found.")
	case len(rest) == 0 || rest[0] != q.kind:
		return errors.New("Error: Invalid qdisc name.")
	}
	if q.kind == "cake" && q.handle == "0:" {
		return errors.New("Error: cake_mq instances are configured through the root.")
	}
	q.opts = mergeOpts(q.opts, rest[1:])
	if q.kind == "cake_mq" {
		for _, c := range d.qdiscs {
			if c.kind == "cake" && c.handle == "0:" {
				c.opts = q.opts
			}
		}
	}
	return nil
}

func (d *Dev) setClass(args []string, add bool) error {
	var parent, id string
	i := 0
	for ; i+1 < len(args); i += 2 {
		switch args[i] {
		case "parent":
			parent = args[i+1]
			continue
		case "classid":
			id = args[i+1]
			continue
		}
		break
	}
	rest := args[i:]
	if len(rest) == 0 || rest[0] != "htb" {
		return errors.New("Error: Specified class kind is unknown.")
	}
	for _, c := range d.classes {
		if c.id == id {
			if add {
				return errors.New("Error: Exclusivity flag on, cannot modify.")
			}
			c.opts = mergeOpts(c.opts, rest[1:])
			return nil
		}
	}
	if !add {
		return errors.New("Error: Specified class not found.")
	}
	if !d.hasParent(parent) {
		return errors.New("Error: Failed to find specified qdisc.")
	}
	d.classes = append(d.classes, &class{kind: "htb", id: id, parent: parent, opts: rest[1:]})
	return nil
}

func (k *Kernel) addFilter(d *Dev, args []string) error {
	f := &filter{}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "parent":
			f.parent = args[i+1]
		case "prio", "pref":
			f.pref = args[i+1]
		case "u32":
			f.kind = "u32"
		case "action":
			f.action = args[i+1]
		case "dev":
			f.to = args[i+1]
		}
	}
	if f.parent == "ffff:" {
		f.parent = tcstats.Ingress
	}
	if f.parent == tcstats.Ingress && d.find(tcstats.Ingress) == nil {
		return errors.New("Error: Parent Qdisc doesn't exists.")
	}
	if f.to != "" && k.dev(f.to) == nil {
		return fmt.Errorf("Cannot find device %q", f.to)
	}
	d.filters = append(d.filters, f)
	return nil
}

// mergeOpts applies a change's key/value words over the current ones.
func mergeOpts(cur, change []string) []string {
	out := slices.Clone(cur)
	for i := 0; i+1 < len(change); i += 2 {
		j := slices.Index(out, change[i])
		if j >= 0 && j+1 < len(out) {
			out[j+1] = change[i+1]
		} else {
			out = append(out, change[i], change[i+1])
		}
	}
	return out
}

// LinkState is a device's state as Link reports it.
type LinkState struct {
	Exists, Up, Routable bool
	Kind                 string
	Index, TXQueues      int
	Alias                string
}

// Link reports a device's state.
func (k *Kernel) Link(name string) LinkState {
	k.mu.Lock()
	defer k.mu.Unlock()
	if d := k.dev(name); d != nil {
		return LinkState{Exists: true, Up: d.Up, Routable: d.Routable, Kind: d.Kind, Alias: d.Alias, Index: d.Index, TXQueues: max(d.TXQueues, 1)}
	}
	return LinkState{}
}

// nextIndex numbers devices as the kernel's ifindex does: never reused.
func (k *Kernel) nextIndex() int {
	k.lastIndex++
	return k.lastIndex
}

// Read renders the qdiscs of every device, and the classes and filters of
// devs, the way tc prints them, and parses that text.
func (k *Kernel) Read(devs ...string) (*tcstats.Snapshot, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Reads++
	var b strings.Builder
	for _, d := range k.devs {
		if d.find("root") == nil {
			fmt.Fprintf(&b, "qdisc noqueue 0: dev %s root refcnt 2\n", d.Name)
		}
		for _, q := range d.qdiscs {
			at := "parent " + q.parent
			switch q.parent {
			case "root":
				at = "root refcnt 2"
			case tcstats.Ingress:
				at = "parent ffff:fff1 ----------------"
			}
			fmt.Fprintf(&b, "qdisc %s %s dev %s %s %s\n", q.kind, q.handle, d.Name, at, strings.Join(q.opts, " "))
			if len(q.stab) > 0 {
				fmt.Fprintf(&b, " %s\n", stabLine(q.stab))
			}
			b.WriteString(" Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)\n backlog 0b 0p requeues 0\n")
		}
	}
	s := &tcstats.Snapshot{Complete: true}
	var err error
	if s.Records, err = tcstats.Parse([]byte(b.String())); err != nil && !errors.Is(err, tcstats.ErrEmpty) {
		return nil, err
	}
	for _, name := range devs {
		d := k.dev(name)
		if d == nil {
			continue
		}
		var t strings.Builder
		for _, c := range d.classes {
			at := "parent " + c.parent
			if c.parent == tcstats.Major(c.id) {
				at = "root"
			}
			fmt.Fprintf(&t, "class %s %s %s %s\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)\n\n", c.kind, c.id, at, strings.Join(c.opts, " "))
		}
		for _, f := range d.filters {
			verb := "Egress Redirect"
			if f.action == "nssmirred" {
				verb = "Redirect"
			}
			fmt.Fprintf(&t, "filter parent ffff: protocol all pref %s %s chain 0 fh 800::800 order 2048 key ht 800 bkt 0 terminal flowid not_in_hw\n  match 00000000/00000000 at 0\n\taction order 1: %s (%s to device %s) stolen\n\n",
				f.pref, f.kind, f.action, verb, f.to)
		}
		if t.Len() == 0 {
			continue
		}
		recs, err := tcstats.Parse([]byte(t.String()))
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			r.Dev = name
			s.Records = append(s.Records, r)
		}
	}
	return s, nil
}

func stabLine(stab []string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(stab); i += 2 {
		m[stab[i]] = stab[i+1]
	}
	out := "linklayer " + m["linklayer"]
	for _, k := range []string{"overhead", "mpu", "mtu", "tsize"} {
		if v, ok := m[k]; ok {
			out += " " + k + " " + v
		}
	}
	return out
}
