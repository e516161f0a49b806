package plan

import (
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

func TestChange(t *testing.T) {
	facts := linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, Kind: "veth"}
	at := func(b config.Backend, down, up int) *Plan {
		t.Helper()
		q := config.Queue{Section: "wan", Enabled: true, Interface: "wan", Download: down, Upload: up, Backend: b,
			IngressECN: true, LinkLayer: config.LinkEthernet, Overhead: 18}
		p, err := Build(q, facts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		b        config.Backend
		from, to [2]int   // download, upload
		want     []string // one per line, in order: both directions
	}{
		{"cake", config.Cake, [2]int{38000, 7600}, [2]int{36000, 7000}, []string{
			"qdisc change dev wan root handle 1: cake bandwidth 7000kbit",
			"qdisc change dev ifb4wan root handle 1: cake bandwidth 36000kbit"}},
		{"cake, one direction", config.Cake, [2]int{38000, 7600}, [2]int{38000, 7000}, []string{
			"qdisc change dev wan root handle 1: cake bandwidth 7000kbit"}},
		{"same rates", config.Cake, [2]int{38000, 7600}, [2]int{38000, 7600}, nil},
		// The leaf keeps limit 200 (the floor) and its quantum below 100 Mbit/s.
		{"htb below the leaf's thresholds", config.FQCodel, [2]int{38000, 7600}, [2]int{36000, 7000}, []string{
			"class change dev wan parent 1: classid 1:1 htb rate 7000kbit ceil 7000kbit burst 1749 cburst 1749 quantum 1518",
			"class change dev ifb4wan parent 1: classid 1:1 htb rate 36000kbit ceil 36000kbit burst 4500 cburst 4500 quantum 4500"}},
		// Above 100 Mbit/s the fq_codel quantum becomes one MTU, and the
		// 30 ms limit rises above its floor: the leaf changes too.
		{"htb across 100 Mbit/s", config.FQCodel, [2]int{38000, 7600}, [2]int{200000, 7600}, []string{
			"class change dev ifb4wan parent 1: classid 1:1 htb rate 200000kbit ceil 200000kbit burst 25000 cburst 25000 quantum 25000",
			"qdisc change dev ifb4wan parent 1:1 handle 10: fq_codel limit 494 target 5ms interval 100ms quantum 1518"}},
		{"nss", config.NSS, [2]int{38000, 7600}, [2]int{36000, 7000}, []string{
			"qdisc change dev wan root handle 1: nsstbl rate 7000kbit burst 3036",
			"qdisc change dev ifb@wan root handle 1: nsstbl rate 36000kbit burst 4554"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := at(tc.b, tc.from[0], tc.from[1]), at(tc.b, tc.to[0], tc.to[1])
			var got []string
			for i := range to.Dirs {
				lines, err := Change(from.Dirs[i], to.Dirs[i])
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range lines {
					got = append(got, strings.Join(l, " "))
					sameAsBuild(t, l, to.Dirs[i].TC)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// Another backend's tree is not a rate change.
	if _, err := Change(at(config.Cake, 38000, 7600).Dirs[0], at(config.FQCodel, 38000, 7000).Dirs[0]); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Errorf("cake to htb: err %v", err)
	}
}

// sameAsBuild checks a change line against the line that builds the same
// node at the new rate: every value the change sets is the value a fresh
// start would set, so a rate change and a restart leave one tree.
func sameAsBuild(t *testing.T, change []string, build [][]string) {
	t.Helper()
	node := func(l []string) (string, int) {
		for i, w := range l {
			if w == "htb" || w == "cake" || w == "fq_codel" || w == "nsstbl" || w == "nssfq_codel" {
				return l[0] + " " + strings.Join(l[3:i], " "), i
			}
		}
		return "", 0
	}
	want, at := node(change)
	for _, b := range build {
		key, bi := node(b)
		if key != want {
			continue
		}
		for k := at + 1; k+1 < len(change); k += 2 {
			v, ok := "", false
			for j := bi + 1; j+1 < len(b); j++ {
				if b[j] == change[k] {
					v, ok = b[j+1], true
					break
				}
			}
			if !ok || v != change[k+1] {
				t.Errorf("%s: %s %s, but a start builds %s %q", want, change[k], change[k+1], change[k], v)
			}
		}
		return
	}
	t.Errorf("no build line for the node of %q", strings.Join(change, " "))
}
