package apply

import (
	"fmt"
	"slices"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// builtRoots are the root qdiscs sqmkit builds (always handle 1:). A stop
// removes a device's root only when it is one of them, so it never takes
// away a tree somebody else configured on the WAN device.
var builtRoots = map[string]bool{"htb": true, "cake": true, "cake_mq": true, "nsstbl": true}

// ours returns, in the one safe order, the tc lines that remove what the
// kernel holds of a queue's directions on wan and its IFB, and what each
// line removes: the ingress hook first (only while it redirects to ifb or
// nowhere), then the IFB's configured root, then wan's root. Run without
// -force, a refused line stops the batch, so the IFB's shaper is never
// removed while a redirect still points at it.
func ours(s *tcstats.Snapshot, wan, ifb string, dirs ...config.Direction) (lines [][]string, what []string) {
	if slices.Contains(dirs, config.Download) {
		if q := s.IngressQdisc(wan); q != nil && q.Kind == "ingress" && !redirectsElsewhere(s, wan, ifb) {
			lines = append(lines, []string{"qdisc", "del", "dev", wan, "ingress"})
			what = append(what, fmt.Sprintf("the ingress qdisc on %s and its redirect", wan))
		}
		if ifb != "" && s.Shaped(ifb) {
			lines = append(lines, []string{"qdisc", "del", "dev", ifb, "root"})
			what = append(what, fmt.Sprintf("%s on %s", s.Root(ifb).ID(), ifb))
		}
	}
	if slices.Contains(dirs, config.Upload) {
		if r := s.Root(wan); r != nil && r.Handle == "1:" && builtRoots[r.Kind] {
			lines = append(lines, []string{"qdisc", "del", "dev", wan, "root"})
			what = append(what, fmt.Sprintf("%s on %s", r.ID(), wan))
		}
	}
	return lines, what
}

func redirectsElsewhere(s *tcstats.Snapshot, wan, ifb string) bool {
	for _, to := range s.Redirects(wan) {
		if to != ifb {
			return true
		}
	}
	return false
}

// devices are the devices of a queue worth reading: those that exist.
func (o *Options) devices(devs ...string) []string {
	var out []string
	for _, d := range devs {
		if d != "" && !slices.Contains(out, d) && o.Kernel.Link(d).Exists {
			out = append(out, d)
		}
	}
	return out
}

// rollback removes what a failed batch of direction d left, from what the
// kernel really holds, and returns what is still there afterwards (read
// back, so the printed outcome is the kernel's; empty means clean).
func (o *Options) rollback(p *plan.Plan, d *plan.Dir) []string {
	ifb := ""
	if d.Direction == config.Download {
		ifb = p.IFB
	}
	_, left, err := o.remove(p.Device, ifb, d.Direction)
	if err != nil {
		o.log("%s %s: rollback: %v", p.Device, d.Direction.Side(), err)
	} else {
		o.log("%s %s: rolled back", p.Device, d.Direction.Side())
	}
	return left
}

// remove deletes what ours finds for dirs and reads the kernel again. It
// returns what it removed, what of it remains (read back), and the error
// that kept it there.
func (o *Options) remove(wan, ifb string, dirs ...config.Direction) (removed, left []string, err error) {
	devs := o.devices(wan, ifb)
	if len(devs) == 0 {
		return nil, nil, nil // the devices are gone, and every qdisc with them
	}
	s, err := o.Kernel.Read(devs...)
	if err != nil {
		return nil, []string{"unknown (" + err.Error() + ")"}, err
	}
	lines, what := ours(s, wan, ifb, dirs...)
	if len(lines) == 0 {
		return nil, nil, nil
	}
	_, err = o.Kernel.Batch("tc", false, lines)
	s, rerr := o.Kernel.Read(o.devices(wan, ifb)...)
	if rerr != nil {
		return nil, []string{"unknown (" + rerr.Error() + ")"}, cmpErr(err, rerr)
	}
	_, left = ours(s, wan, ifb, dirs...)
	for _, w := range what {
		if !slices.Contains(left, w) {
			removed = append(removed, w)
		}
	}
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("tc accepted the removal, yet it is still there")
	}
	return removed, left, err
}

func cmpErr(first, second error) error {
	if first != nil {
		return first
	}
	return second
}
