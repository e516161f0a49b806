package tc

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseStderr(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		fails []Failure
		warns []string
	}{
		{"kernel refusal", "Error: Specified qdisc kind is unknown.\nCommand failed -:3\n",
			[]Failure{{3, "Error: Specified qdisc kind is unknown."}}, nil},
		{"warning then force refusals", "Warning: sch_htb: quantum of class 10001 is big. Consider r2q change.\nError: Exclusivity flag on, cannot modify.\nCommand failed -:1\nError: Cannot find specified qdisc on specified device.\nCommand failed -:2\n",
			[]Failure{{1, "Error: Exclusivity flag on, cannot modify."}, {2, "Error: Cannot find specified qdisc on specified device."}},
			[]string{"Warning: sch_htb: quantum of class 10001 is big. Consider r2q change."}},
		{"usage text dropped", "pfifo: unknown parameter \"ecn\"\nUsage: ... <[p|b]fifo | pfifo_head_drop> [ limit NUMBER ]\nCommand failed -:1\n",
			[]Failure{{1, `pfifo: unknown parameter "ecn"`}}, nil},
		{"died without a line", "Bad action type nssmirred\nUsage: ... gact <ACTION> [RAND] [INDEX]\nWhere: \tACTION := reclassify\n",
			[]Failure{{0, "Bad action type nssmirred"}}, nil},
		{"ip", "Error: Unknown device type.\nCommand failed -:1\n", []Failure{{1, "Error: Unknown device type."}}, nil},
	} {
		fails, warns := parseStderr(c.in)
		if !reflect.DeepEqual(fails, c.fails) || !reflect.DeepEqual(warns, c.warns) {
			t.Errorf("%s: got %+v %q, want %+v %q", c.name, fails, warns, c.fails, c.warns)
		}
	}
}

func TestHint(t *testing.T) {
	for _, c := range []struct {
		argv []string
		msg  string
		want string
	}{
		{[]string{"qdisc", "add", "dev", "wan", "parent", "1:1", "handle", "10:", "fq_codel", "limit", "200"},
			"Error: Specified qdisc kind is unknown.", "fq_codel is missing: load kernel module sch_fq_codel (OpenWrt: opkg install kmod-sched-core)"},
		{nil, `Unknown qdisc "nsstbl", hence option "rate" is unparsable`,
			"nsstbl is missing: load kernel module qca-nss-drv-qdisc (OpenWrt: opkg install kmod-qca-nss-drv-qdisc)"},
		{nil, "Bad action type nssmirred", "nssmirred is missing: load kernel module act_nssmirred (OpenWrt: opkg install kmod-qca-nss-drv-igs)"},
		{[]string{"filter", "add", "dev", "wan", "parent", "ffff:", "u32", "match", "u32", "0", "0", "action", "mirred", "egress"},
			"Error: Failed to load TC action module.", "mirred is missing: load kernel module act_mirred (OpenWrt: opkg install kmod-sched-core)"},
		{[]string{"qdisc", "add", "dev", "wan", "root", "cake", "bandwidth", "x"}, "Error: Exclusivity flag on, cannot modify.", ""},
		// the kind, not an option that names another (cake's "ingress")
		{[]string{"qdisc", "add", "dev", "ifb4wan", "root", "handle", "1:", "cake_mq", "bandwidth", "9000kbit", "ingress"},
			"Error: Specified qdisc kind is unknown.", "cake_mq is missing: load kernel module sch_cake (OpenWrt: opkg install kmod-sched-cake); cake_mq is in Linux 7.0 and later and in OpenWrt 25.12's kernel, and needs tc from iproute2 7.1 or later"},
		{[]string{"qdisc", "add", "dev", "wan", "handle", "ffff:", "ingress"},
			"Error: Specified qdisc kind is unknown.", "ingress is missing: load kernel module sch_ingress (OpenWrt: opkg install kmod-sched-core)"},
	} {
		if got := hint(c.argv, c.msg); got != c.want {
			t.Errorf("hint(%q, %q) = %q, want %q", c.argv, c.msg, got, c.want)
		}
	}
}

// TestHintObjectNotFound: a change that finds no qdisc (autorate after a
// stop) is about the tree, not a missing module: no "load kernel module".
func TestHintObjectNotFound(t *testing.T) {
	argv := []string{"qdisc", "change", "dev", "wan", "root", "handle", "1:", "nsstbl", "rate", "9000kbit"}
	for _, msg := range []string{"Error: Qdisc not found. To create specify NLM_F_CREATE flag.", "Cannot find specified qdisc on specified device."} {
		got := hint(argv, msg)
		if strings.Contains(got, "load kernel module") || msg[0] == 'E' && !strings.Contains(got, "sqmkit start") {
			t.Errorf("hint(%q) = %q", msg, got)
		}
	}
}

// TestRuntimeState: the probe cache sits with sqmkit's other runtime state
// under /var/run/sqmkit, a tmpfs on Debian and OpenWrt alike; OpenWrt has
// no /run.
func TestRuntimeState(t *testing.T) {
	if !strings.HasPrefix(DefaultCacheDir, "/var/run/sqmkit/") {
		t.Errorf("probe cache %s is not under /var/run/sqmkit", DefaultCacheDir)
	}
}
