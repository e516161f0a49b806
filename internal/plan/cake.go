package plan

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
)

func cakeRTTPresetNames() []string { return slices.Sorted(maps.Keys(config.CakeRTTPresets)) }

func cakeATM(l link) string {
	if l.atm {
		return "atm"
	}
	return "noatm"
}

// cakeRTT turns q.RTT ("", a preset, "50ms" or "rtt 50ms", as
// config.Validate accepts it) into the cake argument that sets it.
func cakeRTT(rtt string) arg {
	v := config.TrimRTT(rtt)
	if v == "" {
		return arg{key: "rtt", val: tcTime(defaultCakeRTT), group: "rtt"}
	}
	if _, ok := config.CakeRTTPresets[v]; ok {
		return arg{key: v, group: "rtt"}
	}
	return arg{key: "rtt", val: v, group: "rtt"}
}

func cakeTree(d *Dir, q config.Queue, l link, s side) error {
	diffserv := q.Diffserv
	if diffserv == "" {
		diffserv = "besteffort"
	}
	if s.dir == config.Download && q.SquashIngress && diffserv != "besteffort" {
		diffserv = "besteffort"
		d.note("squash_ingress: DSCP ignored on ingress, diffserv besteffort")
	}
	rtt := cakeRTT(q.RTT)
	isolation := "dual-srchost"
	if s.dir == config.Download {
		isolation = "dual-dsthost"
	}
	args := []arg{
		{key: "bandwidth", val: kbit(s.rate), group: "bandwidth"},
		{key: diffserv, group: "diffserv"},
		{key: isolation, group: "isolation"},
		{key: "nat", group: "nat"},
	}
	if s.dir == config.Download {
		if q.SquashDSCP {
			args = append(args, arg{key: "wash", group: "wash"})
			d.note("squash_dscp: wash clears DSCP on ingress")
		}
		args = append(args, arg{key: "ingress", group: "ingress"})
	}
	args = append(args,
		arg{key: "overhead", val: strconv.Itoa(l.overhead), group: "overhead"},
		arg{key: "mpu", val: strconv.Itoa(l.mpu), group: "mpu"},
		arg{key: cakeATM(l), group: "atm"},
		rtt)

	user, err := parseOpts(s.opts, cakeGrammar)
	if err != nil {
		return q.Bad(s.optsFd, s.opts, "%v", err)
	}
	if _, ok := lookup(user, "autorate-ingress"); ok && s.queues > 1 {
		return q.Bad(s.optsFd, s.opts, "autorate-ingress does not work with cake_mq (the kernel refuses it); remove it, or set use_mq 0")
	}
	final := override(args, user)
	var rttArg arg
	for _, a := range final {
		if a.group == "rtt" {
			rttArg = a
		}
	}
	d.Interval = config.CakeRTTPresets[rttArg.key]
	if rttArg.key == "rtt" {
		if d.Interval, err = timeOpt(final, "rtt"); err != nil {
			return q.Bad(s.optsFd, s.opts, "rtt %v", err)
		}
	}
	if v, ok := lookup(user, "overhead"); ok {
		if d.Overhead, err = strconv.Atoi(v); err != nil {
			return q.Bad(s.optsFd, s.opts, "overhead %q is not a whole number of bytes", v)
		}
	}
	if v, ok := lookup(user, "mpu"); ok {
		if d.MPU, err = strconv.Atoi(v); err != nil {
			return q.Bad(s.optsFd, s.opts, "mpu %q is not a whole number of bytes", v)
		}
	}
	d.Target = d.Interval / 20
	d.ECN = true
	d.note("cake: %s -> interval %s, target %s (rtt/20; cake raises it on slow links itself)",
		strings.Join(words([]arg{rttArg}), " "), tcTime(d.Interval), tcTime(d.Target))
	d.note("cake: %s, %s, nat; ECN always on (cake marks ECN-capable flows, there is no switch)", diffserv, isolation)
	if s.limit > 0 {
		d.note("%s %d ignored: cake sizes its queue by memory (memlimit)", s.limitField, s.limit)
	}
	if len(user) > 0 {
		d.note("%s applied: %q", s.optsFd, s.opts)
	}
	kind := "cake"
	if s.queues > 1 {
		kind = "cake_mq"
	}
	d.TC = [][]string{append([]string{"qdisc", "add", "dev", s.dev, "root", "handle", "1:", kind}, words(final)...)}
	d.Tree = []Node{{Dev: s.dev, Type: "qdisc", Kind: kind, Handle: "1:", Parent: "root"}}
	if s.queues > 1 {
		// The kernel attaches the instances itself (handle 0:, as the
		// defaults it attaches to a bare device), so the tree is the root.
		d.note("cake_mq: one cake per queue (parents 1:1 to 1:%d) sharing the configuration and the shaper's rate", s.queues)
	}
	return nil
}
