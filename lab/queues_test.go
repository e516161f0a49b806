package main

import (
	"os"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

// TestCostOf: a lab capture of cake_mq on cable under kernel 7.2 (the
// doctor's fixture) gives each root's queues their packets in parent
// order, and the bidirectional phase's vCPU load a cost per Mbit.
func TestCostOf(t *testing.T) {
	b, err := os.ReadFile("../internal/doctor/testdata/cake_mq-tc-s.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := &accept.Measurement{Phases: []accept.Phase{{Name: accept.Bidir, DownMbps: 35.5, UpMbps: 6.5, Noise: &noise.Stats{Busy: 0.63}}}}
	c, err := costOf(string(b), []string{"wan", "ifb4wan"}, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Roots["wan"] != "cake_mq" || c.Roots["ifb4wan"] != "cake_mq" || len(c.Queues) != 2 {
		t.Fatalf("%+v", c)
	}
	if q := c.Queues[1]; q.Dev != "ifb4wan" || len(q.Packets) != 2 || q.Packets[0]+q.Packets[1] != 291956 || q.Packets[0] != 0 && q.Packets[1] != 0 {
		t.Errorf("ifb4wan queues %+v", q)
	}
	if got := c.CPUMsPerMbit; got < 29.9 || got > 30.1 { // 0.63 × 2 × 1000 / 42
		t.Errorf("CPU %.2f ms per Mbit, want 30", got)
	}
	line := costLine(c)
	if !strings.Contains(line, "ifb4wan queues ") || !strings.Contains(line, "% of 291956 pkt") || !strings.Contains(line, "guest CPU 30.0 ms per shaped Mbit") {
		t.Errorf("line %q", line)
	}
	plain := strings.ReplaceAll(string(b), "cake_mq", "cake")
	if c, _ := costOf(plain, []string{"wan", "ifb4wan"}, nil); len(c.Queues) != 0 || !strings.Contains(costLine(c), "roots ifb4wan cake, wan cake") {
		t.Errorf("plain cake: %+v %q", c, costLine(c))
	}
}
