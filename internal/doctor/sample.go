package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
	"github.com/sqmkit/sqmkit/internal/tcstats"
	"github.com/sqmkit/sqmkit/internal/uci"
)

// ReadDevice reads /sys/class/net/<name> under root ("/" on the live
// system, a copied tree for a router examined elsewhere).
func ReadDevice(root, name string) Device {
	dir := filepath.Join(root, "sys", "class", "net", name)
	d := Device{Name: name}
	if _, err := os.Stat(dir); err != nil {
		return d
	}
	d.Exists = true
	read := func(f string) string {
		b, err := sizelimit.ReadFile(filepath.Join(dir, f), sizelimit.Sys, "/sys file")
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	d.OperState = read("operstate")
	d.Type, _ = strconv.Atoi(read("type"))
	d.MTU, _ = strconv.Atoi(read("mtu"))
	if s, err := strconv.Atoi(read("speed")); err == nil && s > 0 {
		d.SpeedMbit = s // virtual devices report -1 or an error
	}
	tx, err1 := strconv.ParseUint(read("statistics/tx_bytes"), 10, 64)
	rx, err2 := strconv.ParseUint(read("statistics/rx_bytes"), 10, 64)
	if err1 == nil && err2 == nil {
		d.TxBytes, d.RxBytes, d.HasCounters = tx, rx, true
	}
	return d
}

// ReadOffload reads the flow-offloading switches of an OpenWrt firewall
// config under root; a missing file means neither is set.
func ReadOffload(root string) (Offload, error) {
	path := filepath.Join(root, "etc", "config", "firewall")
	data, err := sizelimit.ReadFile(path, sizelimit.UCI, "UCI config file")
	if errors.Is(err, fs.ErrNotExist) {
		return Offload{}, nil
	}
	if err != nil {
		return Offload{}, err
	}
	f, err := uci.Parse(path, data)
	if err != nil {
		return Offload{}, err
	}
	var o Offload
	for _, s := range f.Sections {
		if s.Type != "defaults" {
			continue
		}
		v, _ := s.Get("flow_offloading")
		hw, _ := s.Get("flow_offloading_hw")
		o.Software = o.Software || v == "1"
		o.Hardware = o.Hardware || hw == "1"
	}
	return o, nil
}

// Collect reads the live state, read-only: the tree through read (which is
// tc.Runner.Read: every device's qdiscs, the classes and filters of devs, or
// of every configured device when devs is empty, and of the IFBs they
// redirect to), plus /sys under root for each of those devices.
func Collect(root string, read func(devs ...string) (*tcstats.Snapshot, error), devs []string) (Sample, error) {
	snap, err := read(devs...)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Snapshot: *snap, Devices: map[string]Device{}}
	want := slices.Clone(devs)
	if len(want) == 0 {
		want = snap.Configured()
	}
	for i := 0; i < len(want); i++ {
		s.Devices[want[i]] = ReadDevice(root, want[i])
		for _, to := range snap.Redirects(want[i]) {
			if !slices.Contains(want, to) {
				want = append(want, to)
			}
		}
	}
	return s, nil
}

// Offline builds a sample from pasted tc output: qdiscs (required), classes
// and filters (optional, nil when not given), and /sys under root when root
// is not "". devs name the WAN devices; the first one owns records that tc
// printed without a device (`tc -s qdisc show dev wan`, class and filter
// output).
func Offline(qdiscs, classes, filters []byte, root string, devs []string) (Sample, error) {
	s := Sample{Devices: map[string]Device{}}
	s.Complete, s.NoFilters, s.NoClasses = true, filters == nil, classes == nil
	recs, err := tcstats.Parse(qdiscs)
	if err != nil {
		return Sample{}, fmt.Errorf("qdisc output: %w", err)
	}
	def := ""
	if len(devs) > 0 {
		def = devs[0]
	}
	for i := range recs {
		if recs[i].Dev == "" {
			if def == "" {
				return Sample{}, errors.New("qdisc output has no `dev` names (it came from `tc -s qdisc show dev X`): name the device as an argument, e.g. `sqmkit doctor --tc-stats FILE wan`")
			}
			recs[i].Dev, s.Complete = def, false
		}
	}
	s.Records = recs
	for _, in := range []struct {
		name string
		data []byte
	}{{"class", classes}, {"filter", filters}} {
		if in.data == nil {
			continue
		}
		more, err := tcstats.Parse(in.data)
		if err != nil {
			return Sample{}, fmt.Errorf("%s output: %w", in.name, err)
		}
		for _, r := range more {
			if r.Dev == "" {
				r.Dev = owner(s.Records, &r, def)
			}
			if r.Type == "filter" && r.Parent == "" {
				r.Parent = tcstats.Ingress // `tc filter show dev X parent ffff:` omits it
			}
			s.Records = append(s.Records, r)
		}
	}
	if root != "" {
		if _, err := os.Stat(filepath.Join(root, "sys", "class", "net")); err == nil {
			for _, r := range s.Records {
				if _, ok := s.Devices[r.Dev]; !ok {
					s.Devices[r.Dev] = ReadDevice(root, r.Dev)
				}
				for _, a := range r.Actions {
					if _, ok := s.Devices[a.Redirect]; a.Redirect != "" && !ok {
						s.Devices[a.Redirect] = ReadDevice(root, a.Redirect)
					}
				}
			}
		}
	}
	return s, nil
}

// owner picks the device of a class or filter printed without one: the
// named WAN device, else the only device whose qdiscs can hold it.
func owner(qdiscs []tcstats.Record, r *tcstats.Record, def string) string {
	if def != "" {
		return def
	}
	var devs []string
	for _, q := range qdiscs {
		holds := r.Type == "class" && q.Handle == tcstats.Major(r.Handle) ||
			r.Type == "filter" && (q.Parent == tcstats.Ingress && (r.Parent == "" || r.Parent == tcstats.Ingress) || q.Handle == r.Parent)
		if holds && !slices.Contains(devs, q.Dev) {
			devs = append(devs, q.Dev)
		}
	}
	// several candidates (the WAN and its IFB both have 1:): the first
	// listed is the WAN device in tc's order of interfaces
	if len(devs) > 0 {
		return devs[0]
	}
	return ""
}
