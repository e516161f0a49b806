package plan

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestWriteGolden compares the rendered output of a few plans with
// testdata/*.golden; run with -update after an intended change.
func TestWriteGolden(t *testing.T) {
	telekomQ, telekomF := telekom()
	for _, tc := range []struct {
		name string
		q    config.Queue
		f    linkinfo.Facts
	}{
		{"nss-telekom", telekomQ, telekomF},
		{"cake-adsl-atm", config.Queue{Section: "adsl", Interface: "pppoe-wan", Backend: config.Cake, Script: "layer_cake.qos",
			Download: 15000, Upload: 1000, LinkLayer: config.LinkATM, Overhead: 44, Diffserv: "diffserv3", SquashDSCP: true,
			IngressECN: true, RTT: "regional"},
			linkinfo.Facts{Device: "pppoe-wan", Exists: true, MTU: 1492, Kind: "ppp", NetworkSection: "wan", Proto: "pppoe", LowerDevice: "dsl0",
				Notes: []string{"pppoe-wan: mtu 1492 from sys/class/net/pppoe-wan/mtu"}}},
		{"fq_codel-gaming", config.Queue{Section: "eth1", Interface: "eth1", Backend: config.FQCodel, Qdisc: "fq_codel", Script: "simple.qos",
			Download: 95000, Upload: 2000, EQdiscOpts: "interval 50ms quantum 304", ITarget: "auto", IngressECN: true},
			linkinfo.Facts{Device: "eth1", Exists: true, MTU: 1500, Kind: "ether"}},
		{"fq_codel-upload-only", config.Queue{Section: "lte", Interface: "wwan0", Backend: config.FQCodel,
			Upload: 20000}, linkinfo.Facts{Device: "wwan0", MTU: 1500}},
		// use_mq on a device with four TX and RX queues: cake_mq on it and
		// on an IFB of four queues
		{"cake_mq-fiber", config.Queue{Section: "wan", Interface: "eth1", Backend: config.Cake, Script: "piece_of_cake.qos",
			Download: 900000, Upload: 400000, UseMQ: true, IngressECN: true},
			linkinfo.Facts{Device: "eth1", Exists: true, MTU: 1500, Kind: "ether", TXQueues: 4, RXQueues: 4}},
		// use_mq on a single-queue device: plain cake, with the reason
		{"cake_mq-one-queue", config.Queue{Section: "wan", Interface: "eth1", Backend: config.Cake, Script: "piece_of_cake.qos",
			Download: 90000, Upload: 40000, UseMQ: true, IngressECN: true},
			linkinfo.Facts{Device: "eth1", Exists: true, MTU: 1500, Kind: "ether", TXQueues: 1, RXQueues: 1}},
		{"cake-download-only-long-name", config.Queue{Section: "lan", Interface: "enp0s31f6.1001", Backend: config.Cake,
			Download: 50000, IngressECN: true}, linkinfo.Facts{Device: "enp0s31f6.1001", MTU: 1500, Kind: "vlan"}},
	} {
		p := mustBuild(t, tc.q, tc.f)
		var buf bytes.Buffer
		if err := p.Write(&buf); err != nil {
			t.Fatal(err)
		}
		checkShellSafe(t, tc.name, buf.String())
		path := filepath.Join("testdata", tc.name+".golden")
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update once)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: output differs from %s:\n%s", tc.name, path, buf.String())
		}
	}
}

// checkShellSafe asserts every line is a comment or an ip/tc command whose
// words need no shell quoting, so the output pastes into a shell as is.
func checkShellSafe(t *testing.T, name, out string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(l, "# ") {
			continue
		}
		if !strings.HasPrefix(l, "tc ") && !strings.HasPrefix(l, "ip ") {
			t.Errorf("%s: line %q is neither a comment nor an ip/tc command", name, l)
		}
		for _, w := range strings.Fields(l) {
			if err := plainWord(w); err != nil {
				t.Errorf("%s: line %q: %v", name, l, err)
			}
		}
	}
}

// TestWriteMatchesDirs checks that the command lines of Write are exactly
// the Dir lines (what tc -batch and ip -batch get), in start order.
func TestWriteMatchesDirs(t *testing.T) {
	q, f := telekom()
	p := mustBuild(t, q, f)
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range p.Dirs {
		for _, l := range d.Teardown {
			want = append(want, "tc "+line(l))
		}
	}
	for _, d := range p.Dirs {
		for _, l := range d.Setup {
			want = append(want, "ip "+line(l))
		}
		for _, l := range d.TC {
			want = append(want, "tc "+line(l))
		}
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.HasPrefix(l, "#") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkBuildWrite measures planning plus rendering of the worked
// example, the work `sqmkit plan` and every start do per queue.
func BenchmarkBuildWrite(b *testing.B) {
	q, f := telekom()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, err := Build(q, f)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Write(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// Names a shell would expand or split are printed quoted, so pasting the
// plan runs exactly the commands it shows.
func TestWriteQuotesForTheShell(t *testing.T) {
	for name, want := range map[string]string{
		"$(reboot)": `tc qdisc del dev '$(reboot)' root`,
		"a;reboot":  `tc qdisc del dev 'a;reboot' root`,
		"a'b":       `tc qdisc del dev 'a'\''b' root`,
		"wan.7":     `tc qdisc del dev wan.7 root`,
	} {
		p := mustBuild(t, config.Queue{Section: "s", Interface: name, Backend: config.Cake, Upload: 1000, LinkLayer: config.LinkNone}, linkinfo.Facts{MTU: 1500})
		var b bytes.Buffer
		if err := p.Write(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("%q: output lacks %q:\n%s", name, want, &b)
		}
		// the shell reads it back as the same words
		out, err := exec.Command("sh", "-c", `for w in `+strings.TrimPrefix(want, "tc ")+`; do echo "$w"; done`).Output()
		if err != nil || strings.Split(string(out), "\n")[3] != name {
			t.Errorf("%q: sh read %q (%v)", name, out, err)
		}
	}
}
