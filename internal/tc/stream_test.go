package tc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// One long-lived tc runs many changes: each Send returns once its lines
// ran, a refused line is reported with its place in that Send, and the
// stream goes on after it.
func TestStream(t *testing.T) {
	ns := tctest.NewNetns(t, "stream")
	ns.Do(t, func() {
		r := &Runner{}
		s, err := r.Stream("tc")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Send(lines(`qdisc add dev wan root handle 1: tbf rate 10mbit burst 18432 limit 100000`)); err != nil {
			t.Fatal(err)
		}
		for _, rate := range []string{"20mbit", "5mbit", "7mbit"} {
			if err := s.Send(lines(`qdisc change dev wan root handle 1: tbf rate ` + rate + ` burst 18432 limit 100000`)); err != nil {
				t.Fatalf("%s: %v", rate, err)
			}
			snap, err := r.Read("wan")
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, rec := range snap.Records {
				for _, o := range rec.Options {
					if rec.Dev == "wan" && rec.Kind == "tbf" && o.Key == "rate" {
						got = o.Value
					}
				}
			}
			if !strings.EqualFold(got, rate) {
				t.Errorf("after %s the kernel holds rate %q", rate, got)
			}
		}
		err = s.Send(lines("qdisc change dev wan root handle 1: tbf rate 9mbit burst 18432 limit 100000\nqdisc change dev nosuch root handle 1: tbf rate 9mbit burst 18432 limit 100000"))
		var be *BatchError
		if !errors.As(err, &be) || be.Failures[0].Line != 2 {
			t.Fatalf("refused second line: %v", err)
		}
		if err := s.Send(lines(`qdisc change dev wan root handle 1: tbf rate 8mbit burst 18432 limit 100000`)); err != nil {
			t.Errorf("after a refusal: %v", err)
		}
		if r.Procs() != 4 { // the stream and three reads
			t.Errorf("%d processes", r.Procs())
		}
	})
}

// A tool that never answers is given up after the timeout, and one that
// died is reported at once.
func TestStreamStuck(t *testing.T) {
	r := &Runner{}
	mute := filepath.Join(t.TempDir(), "mute")
	os.WriteFile(mute, []byte("#!/bin/sh\ncat >/dev/null\n"), 0o755) // reads its input, never says "Command failed"
	s, err := r.Stream(mute)
	if err != nil {
		t.Fatal(err)
	}
	s.Timeout = 200 * time.Millisecond
	if err := s.Send(lines("qdisc show")); err == nil || !strings.Contains(err.Error(), "did not run") {
		t.Errorf("stuck tool: %v", err)
	}
	s, err = r.Stream("true")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := s.Send(lines("qdisc show")); err == nil {
		t.Error("a dead tool took the lines")
	}
}
