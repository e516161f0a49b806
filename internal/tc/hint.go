package tc

import "strings"

// modules maps a qdisc, filter, action or link kind to the kernel module
// that provides it and the OpenWrt package that ships that module.
var modules = map[string][2]string{
	"fq_codel":    {"sch_fq_codel", "kmod-sched-core"},
	"cake":        {"sch_cake", "kmod-sched-cake"},
	"cake_mq":     {"sch_cake", "kmod-sched-cake"},
	"htb":         {"sch_htb", "kmod-sched-core"},
	"tbf":         {"sch_tbf", "kmod-sched-core"},
	"ingress":     {"sch_ingress", "kmod-sched-core"},
	"u32":         {"cls_u32", "kmod-sched-core"},
	"mirred":      {"act_mirred", "kmod-sched-core"},
	"ifb":         {"ifb", "kmod-ifb"},
	"nsstbl":      {"qca-nss-drv-qdisc", "kmod-qca-nss-drv-qdisc"},
	"nssfq_codel": {"qca-nss-drv-qdisc", "kmod-qca-nss-drv-qdisc"},
	"nssmirred":   {"act_nssmirred", "kmod-qca-nss-drv-igs"},
}

func hintFor(kind string) string {
	m, ok := modules[kind]
	if !ok {
		return ""
	}
	h := kind + " is missing: load kernel module " + m[0] + " (OpenWrt: opkg install " + m[1] + ")"
	if kind == "cake_mq" {
		h += "; cake_mq is in Linux 7.0 and later and in OpenWrt 25.12's kernel, and needs tc from iproute2 7.1 or later"
	}
	return h
}

// hint names the missing module when msg says a kind is unknown. tc's own
// messages name the kind ("Unknown qdisc \"nsstbl\"", "Bad action type
// nssmirred"); the kernel's do not ("Specified qdisc kind is unknown."), so
// then the kind is taken from the refused line.
func hint(argv []string, msg string) string {
	for _, w := range strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == '"' || r == '.' || r == ',' }) {
		if _, ok := modules[w]; ok && w != "ingress" {
			return hintFor(w)
		}
	}
	low := strings.ToLower(msg)
	if strings.Contains(low, "not found") && len(argv) > 1 && (argv[1] == "change" || argv[1] == "replace" || argv[1] == "del") {
		// the object, not its kind: a rate change after a stop, or on a
		// device re-created bare (TestHintObjectNotFound)
		return "the qdisc or class to change is not there: the shaper was stopped or its device re-created; sqmkit start applies it again"
	}
	kindUnknown := strings.Contains(low, "unknown") || strings.Contains(low, "failed to load") ||
		strings.Contains(low, "not found") && strings.Contains(low, "action")
	if !kindUnknown {
		return ""
	}
	if strings.Contains(low, "action") {
		for i := 0; i+1 < len(argv); i++ {
			if argv[i] == "action" {
				return hintFor(argv[i+1])
			}
		}
	}
	if k := kindOf(argv); k != "" {
		return hintFor(k)
	}
	for _, w := range argv {
		if _, ok := modules[w]; ok {
			return hintFor(w)
		}
	}
	return ""
}

// kindOf is the qdisc or class kind a `qdisc|class add|change|replace dev
// DEV ...` line names: the first word after its placement (root, handle H,
// parent P, classid C). Words after it are options, which may name other
// kinds (cake's "ingress").
func kindOf(argv []string) string {
	if len(argv) < 4 || argv[0] != "qdisc" && argv[0] != "class" || argv[2] != "dev" {
		return ""
	}
	for i := 4; i < len(argv); i++ {
		switch argv[i] {
		case "root":
		case "handle", "parent", "classid":
			i++
		default:
			return argv[i]
		}
	}
	return ""
}
