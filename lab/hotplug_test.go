package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPingRuns(t *testing.T) {
	line := func(seq int) string {
		return fmt.Sprintf("[1795500092.%06d] 64 bytes from 10.3.0.2: icmp_seq=%d ttl=62 time=15.5 ms\n", seq, seq)
	}
	for _, tc := range []struct {
		name          string
		sent          int
		lost          []int
		runs, longest int
	}{
		{"none lost", 20, nil, 0, 0},
		{"one graft", 20, []int{7, 8, 9, 10}, 1, 4},
		{"two gaps", 20, []int{3, 15, 16}, 2, 2},
		{"the last ones", 20, []int{19, 20}, 1, 2},
		{"the first one", 20, []int{1}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("PING 10.3.0.2 (10.3.0.2) 56(84) bytes of data.\n")
			for seq := 1; seq <= tc.sent; seq++ {
				if !slices.Contains(tc.lost, seq) {
					b.WriteString(line(seq))
				}
			}
			if len(tc.lost) == 0 {
				b.WriteString(line(3)[:len(line(3))-1] + " (DUP!)\n")
			}
			fmt.Fprintf(&b, "\n--- 10.3.0.2 ping statistics ---\n%d packets transmitted, %d received, 0%% packet loss, time 66ms\n", tc.sent, tc.sent-len(tc.lost))
			path := filepath.Join(t.TempDir(), "ping.log")
			os.WriteFile(path, []byte(b.String()), 0o644)
			p, err := pingLoss(path)
			if err != nil {
				t.Fatal(err)
			}
			runs, longest := p.runs()
			if p.lost() != len(tc.lost) || runs != tc.runs || longest != tc.longest {
				t.Errorf("lost %d runs %d longest %d, want %d %d %d\n%s", p.lost(), runs, longest, len(tc.lost), tc.runs, tc.longest, p)
			}
			if got := strings.Count(p.String(), "lost"); got != len(tc.lost) {
				t.Errorf("String lists %d losses, want %d", got, len(tc.lost))
			}
		})
	}
	path := filepath.Join(t.TempDir(), "ping.log")
	os.WriteFile(path, []byte(line(1)+"2 packets transmitted, 2 received\n"), 0o644)
	if _, err := pingLoss(path); err == nil {
		t.Error("a summary that disagrees with the replies logged was accepted")
	}
}
