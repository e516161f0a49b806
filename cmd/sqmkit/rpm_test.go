//go:build !router

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestRPMThroughBottleneck runs `sqmkit test --rpm` against `sqmkit serve
// --rpm` through a 150 Mbit/s tbf with a 2.5 MB buffer on each side, the
// path where the client's foreign probes used to overrun the server's
// handshake cap and one refused probe ended the test. Every run must
// complete with an RPM. SQMKIT_RPM_RUNS sets the number of runs (1 in
// make test; docs/results.md has a run of 10).
func TestRPMThroughBottleneck(t *testing.T) {
	runs := 1
	if v, err := strconv.Atoi(os.Getenv("SQMKIT_RPM_RUNS")); err == nil && v > 0 {
		runs = v
	}
	srv, cli := tctest.NewPair(t, "rpm", 79)
	for _, n := range []*tctest.Netns{srv, cli} {
		n.Exec(t, "tc", "qdisc", "add", "dev", n.Dev, "root", "tbf", "rate", "150mbit", "burst", "64k", "limit", "2500000")
	}
	bin := buildSqmkit(t)
	addr := srv.Addr + ":4443"
	serve := exec.Command("ip", "netns", "exec", srv.Name, bin, "serve", "--listen", srv.Addr+":5201", "--rpm", addr)
	out, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { serve.Process.Kill(); serve.Wait() }()
	ready := make(chan bool)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "rpm: config https://") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("sqmkit serve --rpm did not start")
	}
	ok := 0
	for i := range runs {
		c := exec.Command("ip", "netns", "exec", cli.Name, bin, "test", "--rpm", "https://"+addr+"/config", "--rpm-insecure")
		b, err := c.CombinedOutput()
		line := strings.TrimSpace(string(b))
		if err == nil && strings.Contains(line, " RPM (download ") && !strings.Contains(line, "cut short") {
			ok++
		}
		t.Logf("run %d: %v\n%s", i+1, err, line)
	}
	fmt.Fprintf(os.Stderr, "rpm through 150 Mbit/s, 2.5 MB tbf: %d/%d runs completed\n", ok, runs)
	if ok != runs {
		t.Errorf("%d of %d runs completed", ok, runs)
	}
}
