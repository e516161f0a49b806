package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

const tcstatsData = "../../internal/tcstats/testdata/"

func TestDoctorOffline(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "fixtures", "nss-flat-tc-s.txt")
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout (or stderr for code 2)
	}{
		{"nss 7-qdisc tree", []string{"--tc-stats", tcstatsData + "nss7-tc-s.txt", "--tc-filter", "../../internal/doctor/testdata/nss7-filter.txt"}, 1, "removable qdiscs: 10: 100: 1000: 200: 2000:"},
		{"htb JSON healthy", []string{"--tc-stats", tcstatsData + "htb-fqcodel-j.json", "eth1"}, 0, "OK    egress  eth1"},
		{"router tree with a down IFB", []string{"--tc-stats", tcstatsData + "htb-fqcodel-tc-s.txt", "--tc-filter", tcstatsData + "ingress-filter.txt",
			"--root", "../../internal/doctor/testdata/roots/ifbdown"}, 1, "FAIL  ifb-down  ifb4eth1"},
		{"missing file", []string{"--tc-stats", "/nonexistent"}, 2, "no such file"},
		{"not tc output", []string{"--tc-stats", "doctor.go"}, 2, "no qdisc, class or filter lines"},
		{"watch needs live", []string{"--tc-stats", tcstatsData + "tbf-tc-s.txt", "--watch", "5"}, 2, "--watch needs the live system"},
		{"class without stats", []string{"--tc-class", "x"}, 2, "need --tc-stats"},
		{"bad flag", []string{"--bogus"}, 2, ""},
	}
	if _, err := os.Stat(shared); err == nil {
		tests = append(tests, struct {
			name string
			args []string
			code int
			want string
		}{"shared NSS flat fixture", []string{"--tc-stats", shared, "wan"}, 0, "0 fail, 0 warn, 1 ok"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runDoctor(tt.args, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, &out, &errb)
			}
			got := out.String()
			if code == 2 {
				got = errb.String()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, got)
			}
		})
	}
}

// buildSqmkit builds the binary, and the lab's tc shim named tc beside it,
// so they can run inside a namespace with its own /sys (ip netns exec
// remounts it).
func buildSqmkit(t *testing.T, tags ...string) string {
	t.Helper()
	dir := t.TempDir()
	for pkg, out := range map[string]string{".": "sqmkit", "../../internal/tc/tcshim": "tc"} {
		if b, err := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return filepath.Join(dir, "sqmkit")
}

// doctorIn runs `sqmkit doctor --json args` in the namespace. With the
// shim, tc on PATH is the lab's NSS stand-in.
func doctorIn(t *testing.T, ns *tctest.Netns, bin string, args ...string) (*doctor.Diagnosis, int, string) {
	t.Helper()
	return sqmkitIn(t, ns, bin, false, append([]string{"doctor", "--json"}, args...)...)
}

func sqmkitIn(t *testing.T, ns *tctest.Netns, bin string, shim bool, args ...string) (*doctor.Diagnosis, int, string) {
	t.Helper()
	env := []string{"env"}
	if shim {
		env = append(env, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "SQMKIT_SHIM_FQ_CODEL=pfifo")
	}
	full := append(append([]string{"netns", "exec", ns.Name}, env...), bin)
	cmd := exec.Command("ip", append(full, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r doctor.Diagnosis
	if code != 2 && args[0] == "doctor" {
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("doctor --json: %v\n%s\n%s", err, out, &stderr)
		}
	}
	return &r, code, string(out) + stderr.String()
}

// blast sends n UDP datagrams out of the namespace's wan device to an
// address that only exists in a static neighbour entry, so every packet
// crosses wan's egress qdiscs and none is answered.
func blast(t *testing.T, ns *tctest.Netns, n int) {
	t.Helper()
	ns.Do(t, func() {
		c, err := net.Dial("udp", "10.77.0.3:9")
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1000)
		for i := 0; i < n; i++ {
			c.Write(buf) // a full pfifo drops; the counters still move
		}
	})
}

func setup(t *testing.T, ns *tctest.Netns, lines ...string) {
	t.Helper()
	for _, l := range lines {
		f := strings.Fields(l)
		ns.Exec(t, f[0], f[1:]...)
	}
}

func has(r *doctor.Diagnosis, sev doctor.Severity, id, subject string) bool {
	for _, f := range r.Findings {
		if f.Severity == sev && f.ID == id && strings.Contains(f.Subject, subject) {
			return true
		}
	}
	return false
}

func TestDoctorLive(t *testing.T) {
	tctest.NeedRoot(t)
	bin := buildSqmkit(t)
	base := []string{
		"ip addr add 10.77.0.1/24 dev wan",
		"ip neigh add 10.77.0.3 lladdr 02:00:00:00:00:03 dev wan",
		"tc qdisc add dev wan root handle 1: htb default 1",
		"tc class add dev wan parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 1514",
		"tc qdisc add dev wan parent 1:1 handle 10: pfifo limit 100",
	}

	t.Run("healthy htb tree", func(t *testing.T) {
		ns := tctest.NewNetns(t, "dochealthy")
		setup(t, ns, base...)
		blast(t, ns, 500)
		r, code, out := doctorIn(t, ns, bin, "wan")
		if code != 0 || r.Status != doctor.OK || !has(r, doctor.OK, "egress", "wan") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})

	t.Run("healthy over a window", func(t *testing.T) { doctorWindow(t, bin, base) })

	t.Run("dead class", func(t *testing.T) {
		ns := tctest.NewNetns(t, "docdead")
		setup(t, ns, append(base,
			"tc class add dev wan parent 1: classid 1:2 htb rate 1mbit ceil 1mbit burst 1600 cburst 1600",
			"tc qdisc add dev wan parent 1:2 handle 20: pfifo limit 10")...)
		blast(t, ns, 500)
		r, code, out := doctorIn(t, ns, bin, "wan")
		if code != 1 || !has(r, doctor.Warn, "dead-class", "wan class htb 1:2") || !has(r, doctor.Warn, "dead-qdisc", "wan qdisc pfifo 20:") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if has(r, doctor.Warn, "dead-class", "1:1") {
			t.Errorf("the live class 1:1 is reported dead:\n%s", out)
		}
	})

	t.Run("redirect to a down IFB", func(t *testing.T) {
		ns := tctest.NewNetns(t, "docifb")
		setup(t, ns, append(base,
			"ip link add ifb4wan type ifb",
			"tc qdisc add dev wan handle ffff: ingress",
			"tc filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4wan")...)
		r, code, out := doctorIn(t, ns, bin) // no IFACE: found from the non-default root
		if code != 1 || r.Status != doctor.Fail || !has(r, doctor.Fail, "ifb-down", "ifb4wan") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		// up but without a shaper it is still a fail, of another kind
		setup(t, ns, "ip link set ifb4wan up")
		r, code, out = doctorIn(t, ns, bin, "wan")
		if code != 1 || !has(r, doctor.Fail, "ifb-no-shaper", "ifb4wan") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})

	t.Run("after sqmkit start, against the same flags", func(t *testing.T) { doctorAfterStart(t, bin) })

	t.Run("unknown device", func(t *testing.T) {
		ns := tctest.NewNetns(t, "docnodev")
		_, code, out := doctorIn(t, ns, bin, "nosuchdev")
		if code != 2 || !strings.Contains(out, "no such device") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}

// doctorWindow: a healthy tree judged over a --watch window of traffic.
func doctorWindow(t *testing.T, bin string, base []string) {
	ns := tctest.NewNetns(t, "docwatch")
	setup(t, ns, base...)
	cmd := exec.Command("ip", "netns", "exec", ns.Name, bin, "doctor", "--json", "--watch", "2", "wan")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	blast(t, ns, 3000) // 3 MB: enough for the bypass check to judge
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	var r doctor.Diagnosis
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Basis != "window" || r.WindowSeconds != 2 || r.Status != doctor.OK || !has(&r, doctor.OK, "on-path", "wan qdisc htb 1:") {
		t.Errorf("report:\n%s", &out)
	}
}

// doctorAfterStart: doctor with sqmkit start's flags finds the tree it
// built, and a mismatch with another rate.
func doctorAfterStart(t *testing.T, bin string) {
	ns := tctest.NewNetns(t, "docstart")
	setup(t, ns, "ip addr add 10.77.0.1/24 dev wan", "ip neigh add 10.77.0.3 lladdr 02:00:00:00:00:03 dev wan")
	root := t.TempDir()
	flags := []string{"--root", root, "--interface", "wan", "--backend", "nss", "--download", "20000"}
	if _, code, out := sqmkitIn(t, ns, bin, true, append([]string{"start"}, append(flags, "--upload", "10000")...)...); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	blast(t, ns, 300)
	r, code, out := sqmkitIn(t, ns, bin, true, append([]string{"doctor", "--json"}, append(flags, "--upload", "10000")...)...)
	if code != 0 || !has(r, doctor.OK, "egress", "wan") || !has(r, doctor.OK, "ingress", "wan") {
		t.Fatalf("doctor after start: exit %d\n%s", code, out)
	}
	r, code, out = sqmkitIn(t, ns, bin, true, append([]string{"doctor", "--json"}, append(flags, "--upload", "12000")...)...)
	if code != 1 || !has(r, doctor.Warn, "mismatch", "wan egress") {
		t.Fatalf("doctor with another upload rate: exit %d\n%s", code, out)
	}
}

// TestDoctorWatchRange: a --watch window beyond a day, negative or not a
// number is refused with the range, never turned into an overflowed
// duration.
func TestDoctorWatchRange(t *testing.T) {
	for _, v := range []string{"99999999999", "-1", "NaN"} {
		var out, errb bytes.Buffer
		code := run([]string{"doctor", "--watch", v}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "want 0 (one reading) to 86400 seconds") || strings.Contains(errb.String()+out.String(), "e+") {
			t.Errorf("--watch %s: exit %d\n%s%s", v, code, out.String(), errb.String())
		}
	}
}

// TestServerPortRange: a server address whose port is out of range is
// refused at once, not dialled and retried for ever.
func TestServerPortRange(t *testing.T) {
	for _, args := range [][]string{{"test", "192.0.2.1:99999"}, {"autorate", "--server", "192.0.2.1:99999", "--interface", "wan", "--download", "20000", "--upload", "10000", "--root", t.TempDir()}} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "not a port from 1 to 65535") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
	}
}
