package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/sizelimit"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Options are one doctor run as `sqmkit doctor` describes it.
type Options struct {
	Root      string // "" with pasted output: no router files; else "/" or a copied tree
	File      string // the SQM config; "" means Root/etc/config/sqm
	Overrides *config.Overrides
	Args      []string // devices or sqm sections; none: the enabled queues' devices
	Watch     time.Duration
	// Pasted output instead of the live system: qdiscs (required), classes
	// and filters (optional), as file names.
	Stats, Classes, Filters string
	Read                    func(devs ...string) (*tcstats.Snapshot, error) // live: tc.Runner.Read
	// RateDir holds the rates sqmkit rate set since the last start
	// (ratestate); live runs judge the tree at those. "": the config's.
	RateDir string
	Warn    func(string) // what could not be judged, one line each
	Web     bool         // read on LuCI's pages (Input.Web)
}

// Run gathers the input (pasted files or two live samples), the
// expectations from the config, and judges them. Any error means the
// doctor could not inspect (exit code 2).
func Run(o Options) (*Diagnosis, error) {
	offline := o.Stats != ""
	switch {
	case !offline && (o.Classes != "" || o.Filters != ""):
		return nil, fmt.Errorf("--tc-class and --tc-filter need --tc-stats FILE")
	case offline && o.Watch > 0:
		return nil, fmt.Errorf("--watch needs the live system; pasted output is one sample (paste two and compare by hand, or run doctor on the router)")
	case o.Watch < 0:
		return nil, fmt.Errorf("--watch %v: want a positive number of seconds, e.g. --watch 10", o.Watch.Seconds())
	}
	// Config files come from Root; /sys from the live system when tc is
	// live (the counters must describe the same kernel), else from Root.
	cfgRoot, sysRoot := o.Root, o.Root
	if !offline {
		sysRoot = "/"
		if cfgRoot == "" {
			cfgRoot = "/"
		}
	}
	var qs []config.Queue
	if cfgRoot != "" || o.File != "" {
		var err error
		if qs, err = config.Expected(cfgRoot, o.File, o.Overrides, o.Args); err != nil {
			return nil, err
		}
	}
	if !offline {
		for i := range qs {
			if _, err := ratestate.Apply(o.RateDir, &qs[i]); err != nil {
				return nil, err
			}
		}
	}
	expect := expectations(cfgRoot, qs, o.Warn)
	var devs []string
	for _, a := range o.Args {
		for _, e := range expect {
			if e.Queue.Section == a {
				a = e.Queue.Interface // a section name stands for its device
			}
		}
		if !offline && !ReadDevice(sysRoot, a).Exists {
			return nil, fmt.Errorf("%s: no such device under %s/sys/class/net (fix: name a device `ip link` lists, or an sqm section)", a, strings.TrimSuffix(sysRoot, "/"))
		}
		devs = append(devs, a)
	}
	if len(devs) == 0 {
		for _, e := range expect {
			devs = append(devs, e.Queue.Interface)
		}
	}
	in := Input{Devices: devs, Expect: expect, Web: o.Web}
	var err error
	if in.Offload, err = ReadOffload(cfgRoot); err != nil {
		o.warn("firewall config not judged: %v", err)
	}
	if offline {
		if in.Now, err = pasted(o, sysRoot, devs); err != nil {
			return nil, err
		}
		return Check(in), nil
	}
	read := append(devs[:len(devs):len(devs)], ifbsOf(devs, expect)...)
	if o.Watch > 0 {
		in.Window = o.Watch
		prev, err := Collect(sysRoot, o.Read, read)
		if err != nil {
			return nil, err
		}
		in.Prev = &prev
		time.Sleep(o.Watch)
	}
	if in.Now, err = Collect(sysRoot, o.Read, read); err != nil {
		return nil, err
	}
	return Check(in), nil
}

func (o Options) warn(format string, a ...any) {
	if o.Warn != nil {
		o.Warn(fmt.Sprintf(format, a...))
	}
}

func pasted(o Options, sysRoot string, devs []string) (Sample, error) {
	data := make([][]byte, 3)
	for i, name := range []string{o.Stats, o.Classes, o.Filters} {
		if name == "" {
			continue
		}
		var err error
		if data[i], err = sizelimit.ReadFile(name, sizelimit.TCOutput, "pasted tc output"); err != nil {
			return Sample{}, fmt.Errorf("%v", err)
		}
	}
	s, err := Offline(data[0], data[1], data[2], sysRoot, devs)
	if err != nil {
		return Sample{}, fmt.Errorf("%s: %v", o.Stats, err)
	}
	return s, nil
}

// expectations plans each queue; a queue that cannot be planned is still
// judged, only without the comparison with its plan.
func expectations(root string, qs []config.Queue, warn func(string)) []Expect {
	var out []Expect
	for _, q := range qs {
		e := Expect{Queue: q}
		if r, ok := cpuload.Load(root, q.Section); root != "" && ok {
			e.CPU = &r
		}
		f, err := linkinfo.Read(root, q.Interface)
		if err == nil {
			e.Plan, err = plan.Build(q, f)
		}
		if err != nil && warn != nil {
			warn(fmt.Sprintf("section %s: not compared with the config: %v", q.Section, err))
		}
		out = append(out, e)
	}
	return out
}

// ifbsOf lists the IFBs the plans expect, so their trees are read even when
// no redirect points at them yet.
func ifbsOf(devs []string, expect []Expect) []string {
	var out []string
	for _, e := range expect {
		if e.Plan != nil && e.Plan.IFB != "" && !slices.Contains(devs, e.Plan.IFB) && !slices.Contains(out, e.Plan.IFB) {
			out = append(out, e.Plan.IFB)
		}
	}
	return out
}
