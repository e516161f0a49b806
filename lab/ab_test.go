package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/search"
)

func TestABSpecCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		sp   abSpec
		want string // in the error; "" for none
	}{
		{"fine", abSpec{Down: 38800, Up: 7760, Arms: []string{"step", "confirm"}, Rounds: 8}, ""},
		{"no rates", abSpec{Arms: []string{"step", "confirm"}, Rounds: 8}, "--rates"},
		{"one round", abSpec{Down: 1, Up: 1, Arms: []string{"step", "confirm"}, Rounds: 1}, "--rounds"},
		{"one arm", abSpec{Down: 1, Up: 1, Arms: []string{"step"}, Rounds: 4}, "at least two"},
		{"unknown arm", abSpec{Down: 1, Up: 1, Arms: []string{"step", "lone"}, Rounds: 4}, `unknown arm "lone"`},
		{"twice", abSpec{Down: 1, Up: 1, Arms: []string{"step", "client", "step"}, Rounds: 4}, `"step" twice`},
	} {
		err := c.sp.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}

func TestABArms(t *testing.T) {
	// step, long and confirm must be tune's own: its steps' idle and
	// lengths, its confirm's three phases, long its upload one segment
	// per packet as on the slow line it is for; client and router the
	// grade's 30 s phase, router-seg that with tune's slow-line upload.
	for _, c := range []struct {
		arm  string
		ns   string
		args string
	}{
		{"client", nsClient, "--download 0s --upload 0s --bidir 30s"},
		{"router", nsRouter, "--download 0s --upload 0s --bidir 30s"},
		{"router-seg", nsRouter, "--download 0s --upload 0s --bidir 30s --one-segment"},
		{"step", nsRouter, "--idle 1s --download 0s --upload 0s --bidir 6s"},
		{"confirm", nsRouter, "--idle 2s --download 6s --upload 6s --bidir 6s"},
		{"long", nsRouter, "--idle 1s --download 0s --upload 0s --bidir 14s --one-segment"},
	} {
		a, ok := abArms[c.arm]
		if !ok {
			t.Fatalf("no arm %s", c.arm)
		}
		if got := strings.Join(a.args, " "); a.ns != c.ns || got != c.args {
			t.Errorf("%s: %s %q, want %s %q", c.arm, a.ns, got, c.ns, c.args)
		}
	}
}

func TestABStats(t *testing.T) {
	ph := func(m, up, down float64) search.Phase {
		return search.Phase{AddedMedian: m, AddedUp: up, AddedDown: down}
	}
	tests := []abTest{
		{Round: 1, Arm: "step", Phase: ph(4, 1, 3), Queues: map[string]queueStats{"modem m0 tbf": {Backlog: 10000}}},
		{Round: 1, Arm: "confirm", Phase: ph(6, 1, 5), Queues: map[string]queueStats{"modem m0 tbf": {Backlog: 30000, PktPerS: 3000, MeanPkt: 1000, DropPerS: 2}}},
		{Round: 2, Arm: "step", Phase: ph(6, 1, 5), Queues: map[string]queueStats{"modem m0 tbf": {Backlog: 20000}}},
		{Round: 2, Arm: "confirm", Phase: ph(7, 1, 6), Queues: map[string]queueStats{"modem m0 tbf": {Backlog: 40000, PktPerS: 5000, MeanPkt: 600}}},
		{Round: 3, Arm: "step", Phase: ph(5, 1, 4)},
		// a failed test counts nowhere, and its round pairs with nothing
		{Round: 3, Arm: "confirm", Phase: ph(99, 0, 0), Error: "lost server"},
	}
	st := abStats(tests, []string{"step", "confirm"})
	if len(st) != 2 || st[0].Arm != "step" || st[1].Arm != "confirm" {
		t.Fatalf("stats %+v, want step then confirm", st)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	s, c := st[0], st[1]
	if s.N != 3 || c.N != 2 {
		t.Errorf("n = %d, %d, want 3, 2", s.N, c.N)
	}
	near("step mean", s.Mean, 5)
	near("step sd", s.SD, 1)
	near("step min", s.Min, 4)
	near("step max", s.Max, 6)
	near("step down", s.Down, 4)
	near("confirm mean", c.Mean, 6.5)
	// rounds 1 and 2: +2 and +1
	if c.PairN != 2 || s.PairN != 0 {
		t.Errorf("pairs = %d, %d, want 2 for confirm, none for the reference", c.PairN, s.PairN)
	}
	near("confirm minus step", c.PairMean, 1.5)
	near("its standard error", c.PairSE, math.Sqrt(0.5)/math.Sqrt(2))
	near("confirm's modem backlog", c.Queues["modem m0 tbf"].Backlog, 35000)
	near("confirm's modem packets", c.Queues["modem m0 tbf"].PktPerS, 4000)
	near("confirm's modem packet size", c.Queues["modem m0 tbf"].MeanPkt, 800)
	near("confirm's modem drops", c.Queues["modem m0 tbf"].DropPerS, 1)
	// step's third test had no sample: its mean is over the tests, so a
	// test without a backlog counts as an empty queue
	near("step's modem backlog", s.Queues["modem m0 tbf"].Backlog, 10000)
	// an arm none of whose tests measured is said so, and its figures
	// still write as JSON (result.json holds them)
	none := abStats([]abTest{{Round: 1, Arm: "client", Error: "refused"}}, []string{"step", "client"})
	if _, err := json.Marshal(none); err != nil || none[1].N != 0 || abLine(none[1], "step") != "client: no test measured" {
		t.Errorf("an arm without a test: %+v, %v, %q", none[1], err, abLine(none[1], "step"))
	}
	line := abLine(c, "step")
	for _, w := range []string{"confirm (2): bidirectional +6.50 ms", "minus step in the same round +1.50 ms", "modem m0 tbf 35.0 KB, 4000 pkt/s of 800 B, 1.0 drops/s"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}
}

func TestParseQdiscs(t *testing.T) {
	at := time.Unix(100, 0)
	js := `[{"kind":"netem","handle":"1:","dev":"m0","root":true,"backlog":90000},
{"kind":"tbf","handle":"10:","parent":"1:1","dev":"m0","backlog":30000,"bytes":9000,"packets":12,"drops":3},
{"kind":"cake","handle":"1:","dev":"pppoe-wan","root":true,"backlog":4500},
{"kind":"fq_codel","handle":"0:","parent":"1:10","dev":"ifb4wan","backlog":800},
{"kind":"noqueue","handle":"0:","dev":"lo","root":true,"backlog":0}]`
	got := parseQdiscs([]byte(js), "modem", at)
	keys := map[string]int{}
	for _, q := range got {
		keys[q.Key] = q.Backlog
	}
	// netem's backlog is its delay line (packets in flight), not a queue;
	// a shaper's tree counts at its root, so its leaves are not added again
	want := map[string]int{"modem m0 tbf": 30000, "modem pppoe-wan cake": 4500}
	if len(keys) != len(want) {
		t.Errorf("samples %v, want %v", keys, want)
	}
	for k, v := range want {
		if keys[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, keys[k], v, keys)
		}
	}
	for _, q := range got {
		if q.Key == "modem m0 tbf" && (q.Bytes != 9000 || q.Packets != 12 || q.Drops != 3) {
			t.Errorf("tbf's counters %+v, want 9000 bytes, 12 packets, 3 drops", q)
		}
	}
	if parseQdiscs([]byte("Error: no such netns"), "modem", at) != nil {
		t.Error("output that is not JSON gave samples")
	}

	s := []qdiscSample{
		{At: time.Unix(99, 0), Key: "k", Backlog: 1000000, Packets: 1, Bytes: 1}, // before the window
		{At: time.Unix(101, 0), Key: "k", Backlog: 1000, Packets: 100, Bytes: 100000, Drops: 5},
		{At: time.Unix(102, 0), Key: "k", Backlog: 3000, Packets: 200, Bytes: 150000, Drops: 5},
		{At: time.Unix(103, 0), Key: "k", Backlog: 2000, Packets: 500, Bytes: 250000, Drops: 9},
		{At: time.Unix(104, 0), Key: "k", Backlog: 1000000, Packets: 1e6, Bytes: 1e9, Drops: 1e3}, // after it
		{At: time.Unix(102, 0), Key: "one", Backlog: 700, Packets: 50, Bytes: 5000},               // one sample: no rates
	}
	m := queueWindow(s, time.Unix(100, 0), time.Unix(103, 0))
	// the counters' differences over the window's first and last sample,
	// 2 s apart: 400 packets, 150000 bytes, 4 drops
	if q := m["k"]; q.Backlog != 2000 || q.PktPerS != 200 || q.MeanPkt != 375 || q.DropPerS != 2 {
		t.Errorf("in the window %+v, want backlog 2000, 200 pkt/s, 375 B, 2 drops/s", q)
	}
	if q := m["one"]; q.Backlog != 700 || q.PktPerS != 0 || q.MeanPkt != 0 {
		t.Errorf("one sample %+v, want its backlog and no rates", q)
	}
}
