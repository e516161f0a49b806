package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// fixture reads a file from this package's testdata or from tcstats'
// testdata ("tcstats/NAME"). "" means not given.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	if name == "" {
		return nil
	}
	path := filepath.Join("testdata", name)
	if rest, ok := strings.CutPrefix(name, "tcstats/"); ok {
		path = filepath.Join("..", "tcstats", "testdata", rest)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type sample struct{ qdisc, class, filter, root string }

func load(t *testing.T, s sample, devs []string) Sample {
	t.Helper()
	root := ""
	if s.root != "" {
		root = filepath.Join("testdata", "roots", s.root)
	}
	smp, err := Offline(fixture(t, s.qdisc), fixture(t, s.class), fixture(t, s.filter), root, devs)
	if err != nil {
		t.Fatal(err)
	}
	return smp
}

func ids(r *Diagnosis) map[string]int {
	m := map[string]int{}
	for _, f := range r.Findings {
		m[f.Severity.String()+" "+f.ID]++
	}
	return m
}

func dump(r *Diagnosis) string {
	var b bytes.Buffer
	r.WriteText(&b)
	return b.String()
}

func TestFindings(t *testing.T) {
	tests := []struct {
		name    string
		in      sample
		devs    []string
		expect  []Expect
		offload bool
		status  Severity
		want    map[string]int // "severity id" → count; absent ids must not appear at warn/fail
	}{
		{name: "nss flat capture is healthy", in: sample{qdisc: "tcstats/nss-flat-tc-s.txt"}, devs: []string{"wan"},
			status: OK, want: map[string]int{"ok egress": 1}},
		{name: "nss 7-qdisc upstream tree", in: sample{qdisc: "tcstats/nss7-tc-s.txt", filter: "nss7-filter.txt"},
			status: Warn, want: map[string]int{"ok egress": 1, "ok ingress": 1, "warn dead-qdisc": 8, "warn one-band": 2, "warn limit-depth": 2}},
		{name: "htb fq_codel both directions healthy", in: sample{qdisc: "tcstats/htb-fqcodel-tc-s.txt", class: "tcstats/htb-fqcodel-class.txt", filter: "tcstats/ingress-filter.txt", root: "healthy"},
			status: OK, want: map[string]int{"ok egress": 1, "ok ingress": 1}},
		{name: "tc -j JSON healthy", in: sample{qdisc: "tcstats/htb-fqcodel-j.json"}, devs: []string{"eth1"},
			status: OK, want: map[string]int{"ok egress": 1}},
		{name: "cake healthy", in: sample{qdisc: "tcstats/cake-tc-s.txt"}, devs: []string{"eth0"},
			status: OK, want: map[string]int{"ok egress": 1}},
		{name: "ifb down is a black hole", in: sample{qdisc: "tcstats/htb-fqcodel-tc-s.txt", filter: "tcstats/ingress-filter.txt", root: "ifbdown"},
			status: Fail, want: map[string]int{"ok egress": 1, "fail ifb-down": 1}},
		{name: "ingress qdisc without the filter output", in: sample{qdisc: "tcstats/htb-fqcodel-tc-s.txt", class: "tcstats/htb-fqcodel-class.txt", root: "healthy"},
			status: OK, want: map[string]int{"ok egress": 2, "ok ingress-unjudged": 1}}, // the IFB, not known as a target, is judged as a device
		{name: "ifb without shaper", in: sample{qdisc: "ifb-no-shaper-tc-s.txt", filter: "tcstats/ingress-filter.txt"},
			status: Fail, want: map[string]int{"ok egress": 1, "fail ifb-no-shaper": 1}},
		{name: "download configured, no ingress", in: sample{qdisc: "tcstats/tbf-tc-s.txt"},
			expect: []Expect{{Queue: config.Queue{Interface: "eth0", Upload: 20000, Download: 100000}}},
			status: Fail, want: map[string]int{"ok egress": 1, "fail no-ingress-shaper": 1, "warn fifo-depth": 1}},
		{name: "upload configured, default root", in: sample{qdisc: "ifb-no-shaper-tc-s.txt"},
			expect: []Expect{{Queue: config.Queue{Interface: "ifb4eth1", Upload: 20000}}},
			status: Fail, want: map[string]int{"fail no-egress-shaper": 1}},
		{name: "nss accel_mode and ignored ecn", in: sample{qdisc: "nss-ecn-tc-s.txt"}, devs: []string{"wan"},
			status: Warn, want: map[string]int{"ok egress": 1, "warn nss-accel-mode": 1, "warn nss-ecn-ignored": 1}},
		{name: "sizing faults", in: sample{qdisc: "sizing-tc-s.txt", class: "sizing-class.txt", root: "slowlink"},
			status: Warn, want: map[string]int{"ok egress": 1, "warn limit-depth": 1, "warn burst-small": 1, "warn burst-large": 1, "warn htb-quantum": 1, "warn rate-above-link": 1}},
		{name: "wondershaper", in: sample{qdisc: "tcstats/wondershaper-tc-s.txt", class: "tcstats/wondershaper-class.txt", filter: "tcstats/wondershaper-filter.txt", root: "wondershaper"},
			status: Warn, want: map[string]int{"ok egress": 1, "warn sfq-perturb": 2, "warn ingress-policer": 1, "warn ipv4-only-filter": 2,
				"warn icmp-priority": 1, "warn ack-priority": 1, "warn multiband-fifo": 1, "warn fifo-depth": 2, "warn burst-large": 4,
				"warn no-overhead": 1, "warn dead-class": 1, "warn dead-qdisc": 1, "warn subclass-ceil": 2}},
		{name: "htb sub-classes that may borrow the whole link", in: sample{qdisc: "htb-borrow-tc-s.txt", class: "htb-borrow-class.txt"}, devs: []string{"eth0"},
			status: OK, want: map[string]int{"ok egress": 1}},
		{name: "htb sub-classes capped at 90%/80% of the link", in: sample{qdisc: "htb-borrow-tc-s.txt", class: "htb-capped-class.txt"}, devs: []string{"eth0"},
			status: Warn, want: map[string]int{"ok egress": 1, "warn subclass-ceil": 2}},
		{name: "htb default class missing", in: sample{qdisc: "htb-direct-tc-s.txt"}, devs: []string{"eth0"},
			status: Warn, want: map[string]int{"ok egress": 1, "warn htb-direct": 1}},
		{name: "pppoe with stab overhead", in: sample{qdisc: "ppp-stab-tc-s.txt", root: "wondershaper"},
			status: OK, want: map[string]int{"ok egress": 1}},
		{name: "hardware flow offloading", in: sample{qdisc: "tcstats/htb-fqcodel-tc-s.txt", class: "tcstats/htb-fqcodel-class.txt", filter: "tcstats/ingress-filter.txt", root: "healthy"},
			offload: true, status: Warn, want: map[string]int{"ok egress": 1, "ok ingress": 1, "warn flow-offload": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Now: load(t, tt.in, tt.devs), Devices: tt.devs, Expect: tt.expect, Offload: Offload{Hardware: tt.offload}}
			r := Check(in)
			if r.Status != tt.status {
				t.Errorf("status %s, want %s", r.Status, tt.status)
			}
			got := ids(r)
			for k, n := range tt.want {
				if got[k] != n {
					t.Errorf("%s: %d findings, want %d", k, got[k], n)
				}
			}
			for k := range got {
				if _, ok := tt.want[k]; !ok && !strings.HasPrefix(k, "ok ") {
					t.Errorf("unexpected finding %s", k)
				}
			}
			for _, f := range r.Findings {
				if len(f.Evidence) == 0 || f.Severity != OK && f.Fix == "" {
					t.Errorf("finding %s %s lacks evidence or fix", f.ID, f.Subject)
				}
			}
			// the same findings on LuCI's pages name no command and no flag
			// (TestWebFixesNameNoFlag)
			web := in
			web.Web = true
			checkWebWords(t, Check(web))
			if t.Failed() {
				t.Log("\n" + dump(r))
			}
		})
	}
}

// TestWebFixesNameNoFlag: what the doctor advises on LuCI's pages is what
// a page can do, never a command line.
func TestWebFixesNameNoFlag(t *testing.T) {
	checkWebWords(t, Check(Input{Web: true}))
	if r := Check(Input{}); !strings.Contains(r.Note, "--watch") || !strings.Contains(r.Findings[0].Fix, "sqmkit start") {
		t.Errorf("the command line's doctor lost its advice: %q, %q", r.Note, r.Findings[0].Fix)
	}
}

func checkWebWords(t *testing.T, r *Diagnosis) {
	t.Helper()
	for _, s := range append([]string{r.Note}, fixes(r)...) {
		if strings.Contains(s, "--") || strings.Contains(s, "sqmkit ") {
			t.Errorf("a web page's doctor advises a command line: %q", s)
		}
	}
}

func fixes(r *Diagnosis) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Fix)
	}
	return out
}

func TestNSS7NamesRemovableQdiscs(t *testing.T) {
	r := Check(Input{Now: load(t, sample{qdisc: "tcstats/nss7-tc-s.txt", filter: "nss7-filter.txt"}, nil)})
	var dead []string
	for _, f := range r.Findings {
		if f.ID == "dead-qdisc" && strings.HasPrefix(f.Subject, "wan ") {
			dead = append(dead, strings.TrimPrefix(f.Subject, "wan "))
		}
		if f.ID == "one-band" && f.Subject == "wan qdisc nssprio 10:" {
			if !strings.Contains(f.Fix, "flat NSS tree") || !strings.Contains(f.Fix, "10: 100: 1000: 200: 2000:") {
				t.Errorf("one-band fix = %q", f.Fix)
			}
			if !strings.Contains(f.Evidence[0], "qdisc nssfq_codel 300:") {
				t.Errorf("one-band evidence = %q", f.Evidence)
			}
		}
	}
	want := "qdisc nsstbl 100:,qdisc nsspfifo 1000:,qdisc nsstbl 200:,qdisc nssred 2000:"
	if strings.Join(dead, ",") != want {
		t.Errorf("dead on wan = %v, want %s", dead, want)
	}
	if r.Basis != "totals" || !strings.Contains(r.Note, "totals since boot") {
		t.Errorf("basis %q note %q", r.Basis, r.Note)
	}
	if strings.Join(r.Devices, ",") != "wan" {
		t.Errorf("devices = %v (ifb@wan is judged as wan's download side)", r.Devices)
	}
}

func TestBypassWindow(t *testing.T) {
	before := load(t, sample{qdisc: "bypass-before.txt"}, nil)
	after := load(t, sample{qdisc: "bypass-after.txt"}, nil)
	const qdiscDelta = 2_000_000
	for _, tt := range []struct {
		name    string
		txDelta uint64
		offload Offload
		want    Severity
		fix     string
	}{
		{"shaper sees everything", qdiscDelta + 50_000, Offload{}, OK, ""},
		{"fast path skips the shaper", 100_000_000, Offload{}, Fail, "FastTrack"},
		{"offloading named", 100_000_000, Offload{Software: true}, Fail, "flow_offloading to 0"},
		{"idle link not judged", 500_000, Offload{}, OK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prev, now := before, after
			prev.Devices = map[string]Device{"eth1": {Name: "eth1", Exists: true, OperState: "up", TxBytes: 5e9, RxBytes: 1e9, HasCounters: true}}
			now.Devices = map[string]Device{"eth1": {Name: "eth1", Exists: true, OperState: "up", TxBytes: 5e9 + tt.txDelta, RxBytes: 1e9, HasCounters: true}}
			r := Check(Input{Now: now, Prev: &prev, Window: 10 * time.Second, Offload: tt.offload})
			if r.Status != tt.want || r.Basis != "window" || r.WindowSeconds != 10 {
				t.Fatalf("status %s basis %s, want %s\n%s", r.Status, r.Basis, tt.want, dump(r))
			}
			if judged := tt.txDelta >= minBypassBytes; judged != (ids(r)["ok on-path"]+ids(r)["fail bypass"] == 1) {
				t.Errorf("bypass judged = %v, want %v\n%s", !judged, judged, dump(r))
			}
			for _, f := range r.Findings {
				if f.ID == "bypass" && !strings.Contains(f.Fix, tt.fix) {
					t.Errorf("fix %q lacks %q", f.Fix, tt.fix)
				}
				if f.ID == "egress" && !strings.Contains(f.Evidence[0], "2100 pkt in 10s") {
					t.Errorf("egress evidence %q should count the window", f.Evidence)
				}
			}
		})
	}
}

// A dead branch over a window: counters that did not move.
func TestDeadOverWindow(t *testing.T) {
	prev := load(t, sample{qdisc: "tcstats/nss7-tc-s.txt", filter: "nss7-filter.txt"}, nil)
	now := load(t, sample{qdisc: "tcstats/nss7-tc-s.txt", filter: "nss7-filter.txt"}, nil)
	r := Check(Input{Now: now, Prev: &prev, Window: 5 * time.Second})
	if n := ids(r)["warn dead-qdisc"]; n != 0 {
		t.Errorf("no traffic in the window: %d dead findings, want 0 (too little to judge)\n%s", n, dump(r))
	}
}

func telekomPlan(t *testing.T, upload int) Expect {
	t.Helper()
	q := config.Queue{Section: "wan", Enabled: true, Interface: "wan", Upload: upload,
		Backend: config.NSS, Script: "nss-zk.qos", ETarget: "4ms", EQdiscOpts: "interval 50ms quantum 304"}
	f := linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"}
	p, err := plan.Build(q, f)
	if err != nil {
		t.Fatal(err)
	}
	return Expect{Queue: q, Plan: p}
}

func TestMismatch(t *testing.T) {
	now := load(t, sample{qdisc: "tcstats/nss-flat-tc-s.txt"}, []string{"wan"})
	good := Check(Input{Now: now, Expect: []Expect{telekomPlan(t, 145000)}})
	if good.Status != OK {
		t.Errorf("plan at 145000 kbit matches the capture:\n%s", dump(good))
	}
	bad := Check(Input{Now: now, Expect: []Expect{telekomPlan(t, 100000)}})
	var ev string
	for _, f := range bad.Findings {
		if f.ID == "mismatch" {
			ev = strings.Join(f.Evidence, "; ")
		}
	}
	// 100000 kbit: the rate differs and so does the 30 ms limit (244 × 1536 B)
	if !strings.Contains(ev, "rate: kernel 145 Mbit/s, config 100 Mbit/s") || !strings.Contains(ev, "limit: kernel 354p, config 244p") {
		t.Errorf("mismatch evidence = %q\n%s", ev, dump(bad))
	}
}

func TestJSONShape(t *testing.T) {
	r := Check(Input{Now: load(t, sample{qdisc: "tcstats/htb-fqcodel-tc-s.txt", filter: "tcstats/ingress-filter.txt", root: "ifbdown"}, nil)})
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Status   string   `json:"status"`
		Basis    string   `json:"basis"`
		Devices  []string `json:"devices"`
		Findings []struct {
			Severity string   `json:"severity"`
			ID       string   `json:"id"`
			Subject  string   `json:"subject"`
			Evidence []string `json:"evidence"`
			Fix      string   `json:"fix"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status != "fail" || back.Basis != "totals" || len(back.Devices) != 1 || back.Findings[0].Severity != "fail" || back.Findings[0].ID != "ifb-down" {
		t.Errorf("JSON = %s", data)
	}
	var s Severity
	if err := s.UnmarshalText([]byte("warn")); err != nil || s != Warn {
		t.Errorf("UnmarshalText = %v %v", s, err)
	}
	if err := s.UnmarshalText([]byte("bad")); err == nil {
		t.Error("UnmarshalText accepted bad")
	}
}

func TestReadOffload(t *testing.T) {
	for root, want := range map[string]Offload{"offload": {true, true}, "healthy": {}, "missing": {}} {
		got, err := ReadOffload(filepath.Join("testdata", "roots", root))
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", root, got, err, want)
		}
	}
}

func TestOfflineErrors(t *testing.T) {
	if _, err := Offline([]byte("qdisc tbf 1: root rate 1Mbit\n"), nil, nil, "", nil); err == nil || !strings.Contains(err.Error(), "name the device") {
		t.Errorf("no dev names and no IFACE: %v", err)
	}
	if _, err := Offline([]byte("nothing here"), nil, nil, "", nil); err == nil {
		t.Error("garbage accepted")
	}
	if _, err := Offline(fixture(t, "tcstats/tbf-tc-s.txt"), []byte("garbage"), nil, "", nil); err == nil || !strings.Contains(err.Error(), "class output") {
		t.Errorf("bad class file: %v", err)
	}
}

// BenchmarkCheckScaling judges pasted output of n leaf qdiscs: ns per
// qdisc must stay flat as n grows (a linear search per node made a 24 MB
// paste take minutes).
func BenchmarkCheckScaling(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		var buf strings.Builder
		buf.WriteString("qdisc htb 1: dev wan root refcnt 2 r2q 10 default 1\n Sent 1000000 bytes 10000 pkt (dropped 0, overlimits 0 requeues 0)\n")
		for i := range n {
			fmt.Fprintf(&buf, "qdisc fq_codel %x: dev wan parent 1:%x limit 200p flows 1024 target 5ms interval 100ms\n Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)\n", i+2, i+2)
		}
		data := []byte(buf.String())
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				s, err := Offline(data, nil, nil, "", []string{"wan"})
				if err != nil {
					b.Fatal(err)
				}
				Check(Input{Now: s, Devices: []string{"wan"}})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/qdisc")
		})
	}
}

func TestPastedOutputLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(p, bytes.Repeat([]byte("qdisc noqueue 0: dev lo root refcnt 2\n"), 17<<20/38), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(Options{Stats: p, Args: []string{"lo"}}); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB, the limit for a pasted tc output") {
		t.Errorf("a 17 MB paste: %v", err)
	}
}

// mqPlan is the plan use_mq makes for the lab's cable WAN (two queues each
// way), at the rates the capture ran at.
func mqPlan(t *testing.T, useMQ bool) Expect {
	t.Helper()
	q := config.Queue{Section: "wan", Enabled: true, Interface: "wan", Download: 38000, Upload: 7600,
		Backend: config.Cake, Script: "piece_of_cake.qos", IngressECN: true, UseMQ: useMQ}
	p, err := plan.Build(q, linkinfo.Facts{Device: "wan", Exists: true, MTU: 1500, Kind: "veth", TXQueues: 2, RXQueues: 2})
	if err != nil {
		t.Fatal(err)
	}
	return Expect{Queue: q, Plan: p}
}

// TestMultiQueue: the lab's capture of cake_mq on cable (7.2, testdata/
// cake_mq-tc-s.txt): the upload shared the WAN's two queues, the download
// took one of the IFB's two, which is the skew finding with its fix; the
// idle instance is not a dead qdisc. Plain cake where cake_mq was planned
// is its own finding, not a generic mismatch.
func TestMultiQueue(t *testing.T) {
	now := load(t, sample{qdisc: "cake_mq-tc-s.txt", filter: "cake_mq-filter.txt"}, []string{"wan"})
	r := Check(Input{Now: now, Devices: []string{"wan"}, Expect: []Expect{mqPlan(t, true)}})
	got := ids(r)
	if got["ok mq-queues"] != 1 || got["warn mq-skew"] != 1 || got["warn dead-qdisc"] != 0 || got["warn mismatch"] != 0 {
		t.Fatalf("findings %v:\n%s", got, dump(r))
	}
	for _, f := range r.Findings {
		switch f.ID {
		case "mq-skew":
			ev := strings.Join(f.Evidence, "; ")
			if f.Subject != "ifb4wan cake_mq" || !strings.Contains(ev, "291956 pkt (100%)") || !strings.Contains(f.Fix, "RX queue") {
				t.Errorf("skew finding %+v", f)
			}
		case "mq-queues":
			if f.Subject != "wan cake_mq" || !strings.Contains(strings.Join(f.Evidence, "; "), "(51%)") {
				t.Errorf("shares finding %+v", f)
			}
		}
	}

	// the same config on a kernel that shaped with plain cake
	plain := strings.ReplaceAll(string(fixture(t, "cake_mq-tc-s.txt")), "qdisc cake_mq 1:", "qdisc cake 1:")
	now, err := Offline([]byte(plain), fixture(t, "cake_mq-filter.txt"), nil, "", []string{"wan"})
	if err != nil {
		t.Fatal(err)
	}
	r = Check(Input{Now: now, Devices: []string{"wan"}, Expect: []Expect{mqPlan(t, true)}})
	if got := ids(r); got["warn mq-plain-cake"] != 2 || got["warn mismatch"] != 0 || got["warn mq-skew"] != 0 {
		t.Errorf("plain cake under use_mq: %v\n%s", got, dump(r))
	}
	// without use_mq, plain cake is what the config asks for
	if got := ids(Check(Input{Now: now, Devices: []string{"wan"}, Expect: []Expect{mqPlan(t, false)}})); got["warn mq-plain-cake"] != 0 {
		t.Errorf("plain cake without use_mq: %v", got)
	}
}
