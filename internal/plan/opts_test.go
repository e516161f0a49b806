package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// valueKeys are the keywords that take a value in any leaf grammar.
var valueKeys = merge(fqCodelGrammar.values, nssFQCodelGrammar.values, cakeGrammar.values)

// groupsOnce fails when a leaf line carries two keywords of one group.
func groupsOnce(t *testing.T, name string, g grammar, leaf []string) {
	t.Helper()
	seen := map[string]string{}
	for i := 0; i < len(leaf); i++ {
		w := leaf[i]
		grp, isValue := g.values[w]
		if !isValue {
			grp = g.flags[w]
		}
		if grp == "" {
			continue
		}
		if prev, ok := seen[grp]; ok {
			t.Errorf("%s: %q and %q of group %q both in %q", name, prev, w, grp, strings.Join(leaf, " "))
		}
		seen[grp] = w
		if isValue {
			i++
		}
	}
}

func TestOptionOverride(t *testing.T) {
	eth := linkinfo.Facts{MTU: 1500, Proto: "dhcp", LowerDevice: "eth0"}
	for _, tc := range []struct {
		name  string
		b     config.Backend
		dir   config.Direction
		opts  string
		elim  int
		want  string // the leaf arguments after the kind
		check func(*Dir) bool
	}{
		{"gaming preset", config.FQCodel, config.Upload, "interval 50ms quantum 304", 0,
			"limit 741 target 5ms interval 50ms quantum 304 flows 1024 noecn",
			func(d *Dir) bool { return d.Interval == 50*time.Millisecond && d.FQQuantum == 304 }},
		{"opts limit beats elimit", config.FQCodel, config.Upload, "limit 1000", 500,
			"limit 1000 target 5ms interval 100ms quantum 1518 flows 1024 noecn",
			func(d *Dir) bool { return d.Limit == 1000 }},
		{"elimit beats computed", config.FQCodel, config.Upload, "", 500,
			"limit 500 target 5ms interval 100ms quantum 1518 flows 1024 noecn",
			func(d *Dir) bool { return d.Limit == 500 }},
		{"ecn flag replaces noecn", config.FQCodel, config.Upload, "ecn", 0,
			"limit 741 target 5ms interval 100ms quantum 1518 flows 1024 ecn",
			func(d *Dir) bool { return d.ECN }},
		{"noecn replaces ecn on ingress", config.FQCodel, config.Download, "noecn", 0,
			"limit 741 target 5ms interval 100ms quantum 1518 flows 1024 noecn",
			func(d *Dir) bool { return !d.ECN }},
		{"last repeat wins", config.FQCodel, config.Upload, "quantum 300 quantum 400 target 3ms", 0,
			"limit 741 target 3ms interval 100ms quantum 400 flows 1024 noecn",
			func(d *Dir) bool { return d.FQQuantum == 400 && d.Target == 3*time.Millisecond }},
		{"known key appended", config.FQCodel, config.Upload, "ce_threshold 2ms", 0,
			"limit 741 target 5ms interval 100ms quantum 1518 flows 1024 noecn ce_threshold 2ms", nil},
		{"nss unknown before tail", config.NSS, config.Upload, "foo bar", 0,
			"limit 739 target 5ms interval 100ms flows 1024 quantum 1522 foo bar set_default accel_mode 0", nil},
		{"nss ecn on egress", config.NSS, config.Upload, "ecn flows 2048", 0,
			"limit 739 target 5ms interval 100ms flows 2048 quantum 1522 ecn set_default accel_mode 0",
			func(d *Dir) bool { return d.ECN && d.Flows == 2048 }},
		{"nss noecn on ingress", config.NSS, config.Download, "noecn", 0,
			"limit 739 target 5ms interval 100ms flows 1024 quantum 1522 noecn set_default accel_mode 0",
			func(d *Dir) bool { return !d.ECN }},
		{"cake modes", config.Cake, config.Upload, "diffserv4 nonat rtt 50ms", 0,
			"bandwidth 300000kbit diffserv4 dual-srchost nonat overhead 18 mpu 64 noatm rtt 50ms",
			func(d *Dir) bool { return d.Interval == 50*time.Millisecond && d.Target == 2500*time.Microsecond }},
		{"cake preset replaces rtt", config.Cake, config.Upload, "regional", 0,
			"bandwidth 300000kbit besteffort dual-srchost nat overhead 18 mpu 64 noatm regional",
			func(d *Dir) bool { return d.Interval == 30*time.Millisecond }},
		{"cake isolation on ingress", config.Cake, config.Download, "triple-isolate ack-filter overhead 44", 0,
			"bandwidth 300000kbit besteffort triple-isolate nat ingress overhead 44 mpu 64 noatm rtt 100ms ack-filter",
			func(d *Dir) bool { return d.Overhead == 44 }},
	} {
		q := baseQueue(tc.b, "eth0", 300000)
		q.EQdiscOpts, q.IQdiscOpts = tc.opts, tc.opts
		q.ELimit = tc.elim
		p := mustBuild(t, q, eth)
		d := dirOf(t, p, tc.dir)
		leafLine := d.TC[0]
		if tc.b != config.Cake {
			leafLine = d.TC[len(d.TC)-1]
			if tc.dir == config.Download {
				leafLine = d.TC[len(d.TC)-3]
			}
		}
		kind := map[config.Backend]string{config.NSS: "nssfq_codel", config.Cake: "cake", config.FQCodel: "fq_codel"}[tc.b]
		got := line(leafLine)
		_, after, _ := strings.Cut(got, " "+kind+" ")
		if after != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, after, tc.want)
		}
		g := map[config.Backend]grammar{config.NSS: nssFQCodelGrammar, config.Cake: cakeGrammar, config.FQCodel: fqCodelGrammar}[tc.b]
		groupsOnce(t, tc.name, g, strings.Fields(after))
		if tc.check != nil && !tc.check(d) {
			t.Errorf("%s: Dir fields do not reflect the options: %+v", tc.name, d)
		}
	}
}

func TestTCTime(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Millisecond: "5ms", 13992 * time.Microsecond: "13992us", time.Second: "1000ms"} {
		if got := tcTime(d); got != want {
			t.Errorf("tcTime(%v) = %s, want %s", d, got, want)
		}
	}
}
