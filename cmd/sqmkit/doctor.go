package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
)

func init() {
	register(command{
		name:    "doctor",
		summary: "check from the kernel's counters that the shaper is really on the path; read-only (exit 0 healthy, 1 findings, 2 could not inspect)",
		run:     func(args []string) int { return runDoctor(args, os.Stdout, os.Stderr) },
	})
}

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", "[IFACE...]")
	fs.SetOutput(stderr)
	root := fs.String("root", "", "read /etc and /sys under `DIR` (default / live; nothing when judging pasted output)")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	watch := fs.Float64("watch", 0, "sample the counters twice, `SECONDS` apart, and judge rates and bypass over that window")
	stats := fs.String("tc-stats", "", "judge pasted `tc -s qdisc show` output from `FILE` (text or tc -j JSON) instead of the live system")
	classes := fs.String("tc-class", "", "with --tc-stats: pasted `tc -s class show dev IFACE` output `FILE`")
	o := config.RegisterFlags(fs)
	filters := fs.String("tc-filter", "", "with --tc-stats: pasted `tc -s filter show dev IFACE parent ffff:` output `FILE`")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sqmkit doctor: "+format+"\n", a...)
		return 2
	}
	offline := *stats != ""
	switch {
	case !offline && (*classes != "" || *filters != ""):
		return fail("--tc-class and --tc-filter need --tc-stats FILE")
	case offline && *watch > 0:
		return fail("--watch needs the live system; pasted output is one sample (paste two and compare by hand, or run doctor on the router)")
	case *watch < 0:
		return fail("--watch %v: want a positive number of seconds, e.g. --watch 10", *watch)
	}
	// Config files come from --root; /sys from the live system when tc is
	// live (the counters must describe the same kernel), else from --root.
	cfgRoot, sysRoot := *root, *root
	if !offline {
		sysRoot = "/"
		if cfgRoot == "" {
			cfgRoot = "/"
		}
	}

	expect, err := expectations(cfgRoot, *file, o, fs.Args(), stderr)
	if err != nil {
		return fail("%v", err)
	}
	var devs []string
	for _, a := range fs.Args() {
		for _, e := range expect {
			if e.Queue.Section == a {
				a = e.Queue.Interface // a section name stands for its device
			}
		}
		if !offline && !doctor.ReadDevice(sysRoot, a).Exists {
			return fail("%s: no such device under %s/sys/class/net (fix: name a device `ip link` lists, or an sqm section)", a, strings.TrimSuffix(sysRoot, "/"))
		}
		devs = append(devs, a)
	}
	if len(devs) == 0 {
		for _, e := range expect {
			devs = append(devs, e.Queue.Interface)
		}
	}
	in := doctor.Input{Devices: devs, Expect: expect}
	if in.Offload, err = doctor.ReadOffload(cfgRoot); err != nil {
		fmt.Fprintf(stderr, "sqmkit doctor: firewall config not judged: %v\n", err)
	}

	if offline {
		data := make([][]byte, 3)
		for i, name := range []string{*stats, *classes, *filters} {
			if name == "" {
				continue
			}
			if data[i], err = os.ReadFile(name); err != nil {
				return fail("%v", err)
			}
		}
		if in.Now, err = doctor.Offline(data[0], data[1], data[2], sysRoot, devs); err != nil {
			return fail("%s: %v", *stats, err)
		}
	} else {
		collect := func() (doctor.Sample, error) {
			return doctor.Collect(sysRoot, runTC, withIFBs(devs, expect))
		}
		if *watch > 0 {
			in.Window = time.Duration(*watch * float64(time.Second))
			prev, err := collect()
			if err != nil {
				return fail("%v", err)
			}
			in.Prev = &prev
			time.Sleep(in.Window)
		}
		if in.Now, err = collect(); err != nil {
			return fail("%v", err)
		}
	}

	r := doctor.Check(in)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteText(stdout)
	}
	if err != nil {
		return fail("%v", err)
	}
	if r.Status == doctor.OK {
		return 0
	}
	return 1
}

// expectations loads what the sqm config says the devices should have:
// the enabled queues, or those named by args, with the config flags
// applied. Without a config file the flags alone describe the queue
// (--interface wan --download ...); with neither, nothing is expected.
func expectations(root, file string, o *config.Overrides, args []string, stderr io.Writer) ([]doctor.Expect, error) {
	if root == "" && file == "" {
		return nil, nil // pasted output without the router's files
	}
	var qs []config.Queue
	_, statErr := os.Stat(config.Path(root, file))
	switch {
	case errors.Is(statErr, fs.ErrNotExist) && file == "":
		var err error
		if qs, err = config.Resolve(root, "", o, ""); err != nil {
			return nil, nil // no config and no --interface: judge what the kernel holds
		}
	default:
		all, err := config.Load(root, file)
		if err != nil {
			return nil, err
		}
		for _, q := range all {
			named := slices.Contains(args, q.Interface) || slices.Contains(args, q.Section)
			if len(args) > 0 && named || len(args) == 0 && q.Enabled {
				o.Apply(&q)
				qs = append(qs, q)
			}
		}
	}
	var out []doctor.Expect
	for _, q := range qs {
		e := doctor.Expect{Queue: q}
		f, err := linkinfo.Read(root, q.Interface)
		if err == nil {
			e.Plan, err = plan.Build(q, f)
		}
		if err != nil {
			// the other checks still run; only the comparison with the plan is lost
			fmt.Fprintf(stderr, "sqmkit doctor: section %s: not compared with the config: %v\n", q.Section, err)
			e.Plan = nil
		}
		out = append(out, e)
	}
	return out, nil
}

// withIFBs adds the IFBs the plans expect, so their trees are read even
// when no redirect points at them yet.
func withIFBs(devs []string, expect []doctor.Expect) []string {
	out := slices.Clone(devs)
	for _, e := range expect {
		if e.Plan != nil && e.Plan.IFB != "" && !slices.Contains(out, e.Plan.IFB) {
			out = append(out, e.Plan.IFB)
		}
	}
	return out
}

// runTC runs tc read-only; doctor only ever passes `show` commands.
func runTC(args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("tc", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
