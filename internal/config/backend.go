package config

import (
	"fmt"
)

// script describes what an sqm-scripts script builds, in sqmkit's terms.
type script struct {
	backend Backend
	// diffserv is the cake mode the script uses; "" for scripts whose tree
	// is chosen by the qdisc option.
	diffserv string
	// leaf is true for the htb-based scripts, which take their leaf qdisc
	// from the qdisc option.
	leaf bool
}

// scripts maps the sqm-scripts names users already have onto the three trees
// sqmkit builds. simplest_tbf's tbf shaper and simple's three htb tiers are
// both served by the single-class htb tree: the tiers only matter with
// DSCP-marked traffic, which cake's diffserv modes handle better.
var scripts = map[string]script{
	"nss-zk.qos":        {backend: NSS},
	"nss.qos":           {backend: NSS},
	"nss-rk.qos":        {backend: NSS},
	"piece_of_cake.qos": {backend: Cake, diffserv: "besteffort"},
	"layer_cake.qos":    {backend: Cake, diffserv: "diffserv3"},
	"simple.qos":        {backend: FQCodel, leaf: true},
	"simplest.qos":      {backend: FQCodel, leaf: true},
	"simplest_tbf.qos":  {backend: FQCodel, leaf: true},
	// sqmkit's own scripts for LuCI's "Queue setup script" list
	// (/usr/lib/sqm/sqmkit-*.qos, installed by the OpenWrt package)
	"sqmkit-nss.qos":      {backend: NSS},
	"sqmkit-cake.qos":     {backend: Cake},
	"sqmkit-fq_codel.qos": {backend: FQCodel},
}

// defaultScript is what sqm-scripts runs when the option is absent.
const defaultScript = "simple.qos"

// deriveBackend sets q.Backend (and q.Diffserv, unless keepDiffserv) from
// q.Script and q.Qdisc, and returns the note that explains the choice.
// q.Script must be empty or a key of scripts.
func deriveBackend(q *Queue, keepDiffserv bool) string {
	name := q.Script
	if name == "" {
		name = defaultScript
	}
	s := scripts[name]
	q.Backend = s.backend
	if s.diffserv != "" && !keepDiffserv {
		q.Diffserv = s.diffserv
	}
	why := fmt.Sprintf("script=%s", name)
	if q.Script == "" {
		why = fmt.Sprintf("no script: sqm-scripts' default %s", name)
	}
	switch {
	case s.leaf && q.Qdisc == "cake":
		q.Backend = Cake
		return fmt.Sprintf("%s qdisc=cake -> backend cake", why)
	case s.leaf && q.Qdisc != "" && q.Qdisc != "fq_codel":
		return fmt.Sprintf("%s -> backend fq_codel (qdisc %s is not supported, fq_codel is used instead)", why, q.Qdisc)
	case !s.leaf && q.Qdisc != "" && q.Qdisc != string(s.backend) && q.Qdisc != "fq_codel":
		return fmt.Sprintf("%s -> backend %s (qdisc %s ignored: the script fixes the tree)", why, s.backend, q.Qdisc)
	}
	return fmt.Sprintf("%s -> backend %s", why, q.Backend)
}
