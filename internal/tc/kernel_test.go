package tc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

func lines(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

var (
	htbBatch = lines(`qdisc add dev wan root handle 1: htb default 1
class add dev wan parent 1: classid 1:1 htb rate 10mbit ceil 10mbit
qdisc add dev wan parent 1:1 handle 10: pfifo limit 200`)
	fqBatch = lines(`qdisc add dev wan root handle 1: tbf rate 10mbit burst 18432 limit 100000
qdisc add dev wan parent 1: handle 10: fq_codel limit 200`)
	ingressBatch = lines(`qdisc add dev ifb4wan root handle 1: tbf rate 10mbit burst 18432 limit 100000
qdisc add dev wan handle ffff: ingress
filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4wan`)
)

// The host kernel lacks fq_codel, which makes it a natural refusal.
func TestProbeAndCache(t *testing.T) {
	tctest.NeedRoot(t)
	r := &Runner{}
	p := &Prober{Runner: r, CacheDir: t.TempDir()}
	res, err := p.Probe([][][]string{htbBatch, fqBatch, ingressBatch})
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || res[2] != nil {
		t.Fatalf("accepted batches refused: %v / %v", res[0], res[2])
	}
	var rej *Rejection
	if !errors.As(res[1], &rej) || rej.Line != 2 || !strings.Contains(rej.Hint, "sch_fq_codel") {
		t.Fatalf("fq_codel batch: got %v, want a line 2 rejection naming sch_fq_codel", res[1])
	}
	if r.Procs() != 2 {
		t.Errorf("cold probe used %d processes, want 2 (ip + tc)", r.Procs())
	}
	before := r.Procs()
	if res, err = p.Probe([][][]string{ingressBatch, htbBatch}); err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("warm probe: %v %v", res, err)
	}
	if r.Procs() != before {
		t.Errorf("warm probe started %d processes, want 0", r.Procs()-before)
	}
	if res, _ = p.Probe([][][]string{fqBatch}); res[0] == nil || r.Procs() != before+2 {
		t.Errorf("refusals must not be cached: %v, %d processes", res[0], r.Procs()-before)
	}
	p.BootID = "another-boot"
	if p.Probe([][][]string{htbBatch}); r.Procs() != before+4 {
		t.Errorf("a new boot must probe again")
	}
}

func TestShow(t *testing.T) {
	ns := tctest.NewNetns(t, "show")
	ns.Exec(t, "ip", "link", "add", "ifb4wan", "type", "ifb")
	ns.Exec(t, "ip", "link", "set", "ifb4wan", "up")
	var st *tcstats.Snapshot
	ns.Do(t, func() {
		r := &Runner{}
		if _, err := r.Batch("tc", false, append(append([][]string{}, htbBatch...), ingressBatch...)); err != nil {
			t.Error(err)
			return
		}
		var err error
		if st, err = r.Read("wan", "ifb4wan"); err != nil {
			t.Error(err)
		}
		// qdisc show, then class, root filters and ingress filters of wan
		if r.Procs() != 5 {
			t.Errorf("read used %d processes, want 4 (+1 batch)", r.Procs()-1)
		}
	})
	if st == nil {
		return
	}
	var qs []string
	for _, q := range st.Records {
		if q.Type == "qdisc" && (q.Dev == "wan" || q.Dev == "ifb4wan") {
			qs = append(qs, q.Dev+" "+q.Kind+" "+q.Handle+" "+q.Parent)
		}
	}
	want := "wan htb 1: root|wan pfifo 10: 1:1|wan ingress ffff: ingress|ifb4wan tbf 1: root"
	if got := strings.Join(qs, "|"); got != want {
		t.Errorf("qdiscs = %q, want %q", got, want)
	}
	if c := st.Find("wan", "class", "1:1"); c == nil || c.Kind != "htb" || c.Parent != "root" {
		t.Errorf("class 1:1 = %+v", c)
	}
	var filters []*tcstats.Record
	for _, r := range st.Of("wan") {
		if r.Type == "filter" && len(r.Actions) > 0 {
			filters = append(filters, r)
		}
	}
	if len(filters) != 1 || filters[0].Kind != "u32" || filters[0].Actions[0].Kind != "mirred" || filters[0].Actions[0].Redirect != "ifb4wan" {
		t.Errorf("filters = %+v", filters)
	}
}

// twinRefuses is a fake tc that refuses nssmirred lines the way an NSS
// kernel may refuse a redirect from a device that is not an NSS port.
const twinRefuses = `#!/bin/sh
in=$(cat)
n=$(printf '%s\n' "$in" | grep -n nssmirred | head -n1 | cut -d: -f1)
printf '%s\n' "$in" | sed '/nssmirred/s/.*//' | /usr/sbin/tc "$@"; rc=$?
[ -n "$n" ] || exit $rc
echo "Error: fromdev is not an NSS interface." >&2
echo "Command failed -:$n" >&2
exit 1
`

func TestProbeTwinRefusalIsInconclusive(t *testing.T) {
	tctest.NeedRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tc"), []byte(twinRefuses), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	nss := append(append([][]string{}, ingressBatch[:2]...),
		strings.Fields("filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action nssmirred redirect dev ifb4wan fromdev wan"))
	var logs []string
	cache := t.TempDir()
	p := &Prober{Runner: &Runner{}, CacheDir: cache, Log: func(s string) { logs = append(logs, s) }}
	res, err := p.Probe([][][]string{nss})
	if err != nil || res[0] != nil {
		t.Fatalf("twin refusal of nssmirred: got %v %v, want no verdict against it", res, err)
	}
	if files, _ := os.ReadDir(cache); len(files) != 0 || len(logs) == 0 || !strings.Contains(logs[0], "twin") {
		t.Errorf("an inconclusive probe must be logged and not cached: %d cache files, logs %q", len(files), logs)
	}
}

// TestProbeCacheRefusesPlanted: a symlink planted at a batch's cache entry
// does not vouch for the batch; it is probed (and refused) as if uncached.
func TestProbeCacheRefusesPlanted(t *testing.T) {
	tctest.NeedRoot(t)
	cache := t.TempDir()
	p := &Prober{Runner: &Runner{}, CacheDir: cache}
	victim := filepath.Join(t.TempDir(), "regular")
	os.WriteFile(victim, []byte("x"), 0o644)
	if err := os.Symlink(victim, filepath.Join(cache, p.key(fqBatch))); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Probe([][][]string{fqBatch}); err != nil || res[0] == nil {
		t.Errorf("a planted cache entry let fq_codel's batch through unprobed: %v %v", res, err)
	}
}
