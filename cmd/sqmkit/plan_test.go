package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestPlanCommand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // lines that must appear
		absent []string // substrings that must not appear in stdout
		stderr string
	}{
		{"all enabled sections (the worked example's router)", []string{"--root", "testdata/router"}, 0,
			[]string{
				"# proto=pppoe device=wan.7 -> overhead 36 bytes (ethernet 18 + nss 4 + pppoe 10 + vlan 4)",
				"# effective MTU 1536 = device MTU 1500 + overhead 36",
				"tc qdisc del dev wan root",
				"ip link add name ifb@wan type ifb",
				"tc qdisc add dev wan root handle 1: nsstbl rate 142500kbit burst 18432 mtu 1536 accel_mode 0",
				"tc qdisc add dev wan parent 1: handle 10: nssfq_codel limit 347 target 4ms interval 50ms flows 1024 quantum 304 set_default accel_mode 0",
				"tc filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action nssmirred redirect dev ifb@wan fromdev wan",
			},
			[]string{"eth1"}, ""},
		{"flags override the file: the fixture's rates", []string{"--root", "testdata/router", "--upload", "145000", "--download", "295000", "wan"}, 0,
			[]string{
				"tc qdisc add dev wan parent 1: handle 10: nssfq_codel limit 354 target 4ms interval 50ms flows 1024 quantum 304 set_default accel_mode 0",
				"tc qdisc add dev ifb@wan parent 1: handle 10: nssfq_codel limit 720 target 4ms interval 50ms flows 1024 quantum 304 ecn set_default accel_mode 0",
			}, nil, ""},
		{"disabled section by name", []string{"--root", "testdata/router", "lan"}, 0,
			[]string{
				"# overhead 34 bytes (configured)",
				"tc qdisc add dev ifb4eth1 root handle 1: cake bandwidth 95000kbit besteffort dual-dsthost nat ingress overhead 34 mpu 64 noatm rtt 100ms",
			}, []string{"nsstbl"}, ""},
		{"plain Linux from flags", []string{"--root", "testdata/linux", "--interface", "eth0", "--upload", "10000", "--backend", "fq_codel"}, 0,
			[]string{
				"tc qdisc add dev eth0 root handle 1: stab overhead 18 linklayer ethernet mpu 64 htb default 1",
				"tc qdisc add dev eth0 parent 1:1 handle 10: fq_codel limit 200 target 5ms interval 100ms quantum 304 flows 1024 noecn",
				"tc qdisc del dev eth0 ingress", // an earlier start's download redirect goes
			}, []string{"ip link add", "filter add"}, ""},
		{"plan error names the flag", []string{"--root", "testdata/router", "--eqdisc-opts", "quantum", "wan"}, 1, nil, nil, "--eqdisc-opts: sqm.wan.eqdisc_opts: \"quantum\" needs a value"},
		{"a rate that looks like a unit slip is planned with a warning", []string{"--root", "testdata/linux", "--interface", "eth0", "--download", "95", "--upload", "0", "--backend", "cake"}, 0,
			[]string{"# warning: download 95 kbit/s is under 1 Mbit/s: right for a slow DSL upload, but rates are in kbit/s, so 95 Mbit/s would be 95000"}, nil, ""},
		{"plan refuses a bad rate", []string{"--root", "testdata/router", "--upload", "10"}, 1, nil, nil, "upload: 10 kbit/s is below the 64 kbit/s minimum"},
		{"unknown section", []string{"--root", "testdata/router", "dsl"}, 1, nil, nil, "dsl"},
		{"two arguments", []string{"--root", "testdata/router", "wan", "lan"}, 2, nil, nil, "one SECTION or IFACE"},
		{"bad flag", []string{"--nope"}, 2, nil, nil, "nope"},
	} {
		var stdout, stderr bytes.Buffer
		code := runPlan(tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %s", tc.name, code, tc.code, stderr.String())
			continue
		}
		lines := strings.Split(stdout.String(), "\n")
		for _, want := range tc.stdout {
			if !slices.Contains(lines, want) {
				t.Errorf("%s: stdout lacks line %q:\n%s", tc.name, want, stdout.String())
			}
		}
		for _, no := range tc.absent {
			if strings.Contains(stdout.String(), no) {
				t.Errorf("%s: stdout contains %q", tc.name, no)
			}
		}
		if tc.code != 0 && stdout.Len() != 0 {
			t.Errorf("%s: failed plan printed to stdout:\n%s", tc.name, stdout.String())
		}
		if !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: stderr %q lacks %q", tc.name, stderr.String(), tc.stderr)
		}
	}
}

// TestRateWarningOnStart: a start (here a dry run) applies a rate that
// looks like a unit slip, and says so first.
func TestRateWarningOnStart(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"start", "--dry-run", "--root", "testdata/linux", "--probe-cache", "", "--interface", "eth0",
		"--download", "95", "--upload", "20000000", "--backend", "cake"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "bandwidth 95kbit") {
		t.Fatalf("exit %d, want 0 and the 95 kbit/s tree:\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, w := range []string{"sqmkit start: eth0: warning: download 95 kbit/s is under 1 Mbit/s", "sqmkit start: eth0: warning: upload 20000000 kbit/s is over 10 Gbit/s"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}
}
