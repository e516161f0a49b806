package main

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	for _, c := range []struct {
		in, want string
		pfifo    bool
	}{
		{"qdisc add dev wan root handle 1: nsstbl rate 145000kbit burst 18432 mtu 1536 accel_mode 0",
			"qdisc add dev wan root handle 1: tbf rate 145000kbit burst 18432 mtu 1536 limit 100000", false},
		{"qdisc add dev wan parent 1: handle 10: nssfq_codel limit 354 target 4ms interval 50ms flows 1024 quantum 304 ecn set_default accel_mode 0",
			"qdisc add dev wan parent 1: handle 10: fq_codel limit 354 target 4ms interval 50ms flows 1024 quantum 304 ecn", false},
		{"qdisc add dev wan parent 1: handle 10: nssfq_codel limit 354 target 4ms set_default accel_mode 0",
			"qdisc add dev wan parent 1: handle 10: pfifo limit 354", true},
		{"qdisc add dev wan parent 1:1 handle 10: fq_codel limit 200 target 5ms noecn",
			"qdisc add dev wan parent 1:1 handle 10: pfifo limit 200", true},
		{"qdisc add dev wan parent 1:1 handle 10: fq_codel limit 200 target 5ms noecn",
			"qdisc add dev wan parent 1:1 handle 10: fq_codel limit 200 target 5ms noecn", false},
		{"qdisc add dev wan root handle 1: stab overhead 18 linklayer ethernet mpu 64 htb default 1",
			"qdisc add dev wan root handle 1: stab overhead 18 linklayer ethernet mpu 64 htb default 1", true},
		{"filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action nssmirred redirect dev ifb@wan fromdev wan",
			"filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb@wan", false},
		{"qdisc del dev nsstbl root", "qdisc del dev nsstbl root", true},
	} {
		if got := strings.Join(rewrite(strings.Fields(c.in), c.pfifo), " "); got != c.want {
			t.Errorf("rewrite(%q, pfifo=%v)\n got %q\nwant %q", c.in, c.pfifo, got, c.want)
		}
	}
}

func TestRewriteStreamKeepsLines(t *testing.T) {
	in := "qdisc add dev wan root handle 1: nsstbl rate 1mbit burst 3072 mtu 1536\n# note\n\nqdisc add dev wan parent 1: handle 10: nssfq_codel limit 200\n"
	var b strings.Builder
	var seen []string
	if err := rewriteStream(strings.NewReader(in), &b, true, func(a []string) { seen = append(seen, strings.Join(a, " ")) }); err != nil {
		t.Fatal(err)
	}
	// the guard sees each command before its rewrite
	if len(seen) != 4 || !strings.Contains(seen[3], "nssfq_codel") {
		t.Errorf("seen %q", seen)
	}
	out := b.String()
	want := "qdisc add dev wan root handle 1: tbf rate 1mbit burst 3072 mtu 1536 limit 100000\n\n\nqdisc add dev wan parent 1: handle 10: pfifo limit 200\n"
	if out != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
}

func TestMapShow(t *testing.T) {
	text := `qdisc tbf 1: root refcnt 2 rate 145Mbit burst 18415b lat 4.5ms 
 Sent 4316052 bytes 6563 pkt (dropped 0, overlimits 182 requeues 0) 
qdisc fq_codel 10: parent 1: limit 354p flows 1024 quantum 304 target 4ms interval 50ms memory_limit 32Mb drop_batch 64 
 Sent 4316052 bytes 6563 pkt (dropped 0, overlimits 0 requeues 0) 
  maxpacket 1518 drop_overlimit 0 new_flow_count 2258 ecn_mark 0
  new_flows_len 0 old_flows_len 0
qdisc ingress ffff: parent ffff:fff1 ----------------
`
	want := `qdisc nsstbl 1: root refcnt 2 rate 145Mbit burst 18415b accel_mode 0
 Sent 4316052 bytes 6563 pkt (dropped 0, overlimits 182 requeues 0) 
qdisc nssfq_codel 10: parent 1: target 4ms limit 354p interval 50ms flows 1024 quantum 304 set_default accel_mode 0
 Sent 4316052 bytes 6563 pkt (dropped 0, overlimits 0 requeues 0) 
  maxpacket 1518 drop_overlimit 0 new_flow_count 2258 ecn_mark 0
qdisc ingress ffff: parent ffff:fff1 ----------------
`
	if got := mapShow(text); got != want {
		t.Errorf("text:\n got %q\nwant %q", got, want)
	}
	js := `[{"kind":"tbf","handle":"1:","root":true},{"kind":"pfifo","handle":"10:","parent":"1:"},{"kind":"pfifo","handle":"20:","parent":"2:"}]` + "\n"
	got := mapShow(js)
	if !strings.Contains(got, `"kind":"nsstbl"`) || strings.Count(got, `"kind":"nssfq_codel"`) != 1 || !strings.Contains(got, `"kind":"pfifo"`) {
		t.Errorf("json: got %s", got)
	}
	if plain := "class htb 1:1 root rate 1Mbit\n"; mapShow(plain) != plain {
		t.Error("output without tbf must pass through")
	}
}

// Each line reaches tc as soon as it arrives, before the next one is
// written: a long-lived batch (autorate's) must not wait for EOF.
func TestRewriteStreamLineByLine(t *testing.T) {
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	go func() { outW.CloseWithError(rewriteStream(pr, outW, false, func([]string) {})) }()
	br := bufio.NewReader(outR)
	for _, l := range []string{"qdisc change dev wan root nsstbl rate 2mbit burst 3072\n", "qdisc show dev wan\n"} {
		go io.WriteString(pw, l)
		got, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, "qdisc ") {
			t.Fatalf("after writing %q: read %q, %v", l, got, err)
		}
	}
	pw.Close()
	if _, err := br.ReadString('\n'); err != io.EOF {
		t.Errorf("after EOF: %v", err)
	}
}
