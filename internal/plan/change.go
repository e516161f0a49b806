package plan

import (
	"fmt"
	"slices"
	"strconv"
)

// Change is the tc batch that moves a running direction from the tree of
// from to the rates of to without tearing it down: `change` lines for the
// nodes whose rate-dependent values differ (cake's bandwidth; htb's rate,
// ceil, burst and quantum; nsstbl's rate and burst; the fq_codel leaf's
// limit, target, interval and quantum, which the planner derives from the
// rate). from and to must be plans of one queue at two rates: the same
// backend, device and tree. Nothing is returned when the rates are equal.
//
// fq_codel's flows is left out: the kernel refuses to change it on a live
// qdisc, and it does not depend on the rate.
func Change(from, to *Dir) ([][]string, error) {
	if from.Direction != to.Direction || from.Device != to.Device || !slices.Equal(from.Tree, to.Tree) {
		return nil, fmt.Errorf("%s on %s: the tree at the new rate differs from the running one; a rate change needs a restart here", to.Direction.Side(), to.Device)
	}
	if len(to.Tree) == 0 {
		return nil, nil
	}
	dev := to.Device
	var lines [][]string
	switch root := to.Tree[0].Kind; root {
	case "cake", "cake_mq":
		// cake_mq's instances take their rate from the root only
		if from.RateKbit != to.RateKbit {
			lines = append(lines, []string{"qdisc", "change", "dev", dev, "root", "handle", "1:", root, "bandwidth", kbit(to.RateKbit)})
		}
	case "htb":
		if from.RateKbit != to.RateKbit || from.Burst != to.Burst || from.Quantum != to.Quantum {
			r, b := kbit(to.RateKbit), strconv.Itoa(to.Burst)
			lines = append(lines, []string{"class", "change", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
				"rate", r, "ceil", r, "burst", b, "cburst", b, "quantum", strconv.Itoa(to.Quantum)})
		}
		lines = append(lines, leafChange(from, to, "1:1", "fq_codel")...)
	case "nsstbl":
		if from.RateKbit != to.RateKbit || from.Burst != to.Burst {
			lines = append(lines, []string{"qdisc", "change", "dev", dev, "root", "handle", "1:", "nsstbl",
				"rate", kbit(to.RateKbit), "burst", strconv.Itoa(to.Burst)})
		}
		lines = append(lines, leafChange(from, to, "1:", "nssfq_codel")...)
	default:
		return nil, fmt.Errorf("%s on %s: no rate change for a %s root", to.Direction.Side(), dev, root)
	}
	return lines, nil
}

// leafChange changes the AQM leaf (handle 10:) where its derived values
// differ.
func leafChange(from, to *Dir, parent, kind string) [][]string {
	if from.Limit == to.Limit && from.Target == to.Target && from.Interval == to.Interval && from.FQQuantum == to.FQQuantum {
		return nil
	}
	return [][]string{{"qdisc", "change", "dev", to.Device, "parent", parent, "handle", "10:", kind,
		"limit", strconv.Itoa(to.Limit), "target", tcTime(to.Target), "interval", tcTime(to.Interval),
		"quantum", strconv.Itoa(to.FQQuantum)}}
}
