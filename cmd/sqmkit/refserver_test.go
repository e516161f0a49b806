//go:build !router

package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestReferenceResponsivenessServer: the real protocol's server and
// client. Behind a bloated modem (bloatedPath), the
// reference responsiveness server (network-quality-server's nginx setup:
// Debian's nginx with its configuration, /slurp on a backend as that
// setup asks, here sqmkit serve --rpm's upload sink, since the setup's own
// Go and Swift backends are not pinned) is graded by `sqmkit test URL`:
// with the letters `sqmkit test` gives against sqmkit serve on the same
// path, and so is the router build's (HTTP/1.1). goresponsiveness (the draft's authors' client, built from its
// pinned commit by scripts/goresponsiveness.sh, with the draft's parameters
// where its defaults depart from them: refserver.GoresponsivenessArgs) and
// `sqmkit test --rpm` then measure the RPM against the same server, within
// twice refserver.Band of each other (docs/results.md: where they differ,
// and why).
func TestReferenceResponsivenessServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about a minute of tests through a tbf")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		tctest.Missing(t, "nginx not installed (scripts/deps.sh installs it)")
	}
	gr, err := exec.Command("../../scripts/goresponsiveness.sh").Output()
	if err != nil {
		tctest.Missing(t, "goresponsiveness did not build (scripts/goresponsiveness.sh): %v", err)
	}
	goresp := strings.TrimSpace(string(gr))
	srv, cli := bloatedPath(t, "rq", 84)
	bin := buildSqmkit(t)
	dir := t.TempDir()
	url, err := refserver.Write(dir, srv.Addr, "127.0.0.1:4043")
	if err != nil {
		t.Fatal(err)
	}

	serveRPM(t, srv, bin, srv.Addr+":8693", "127.0.0.1:4043") // and /slurp's backend
	ng := exec.Command("ip", append([]string{"netns", "exec", srv.Name}, refserver.Command(nginx, dir)...)...)
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM, not a kill: nginx's master then stops its workers, which
	// a killed master leaves running in the deleted namespace
	defer func() { ng.Process.Signal(syscall.SIGTERM); ng.Wait() }()
	if err := tctest.WaitListening(srv.Name, "tcp", refserver.Port, 10*time.Second); err != nil {
		t.Fatalf("%v\nnginx:\n%s", err, refserver.Log(dir))
	}
	if err := refserver.Failed(dir); err != nil {
		t.Fatal(err)
	}

	grade := gradeEach(t, cli, bin, map[string][]string{"sqmkit serve": {srv.Addr}, "reference server": {url, "--rpm-insecure"}}, func() string { return "\nnginx:\n" + refserver.Log(dir) })
	ref := grade["reference server"]
	if !ref.RTTOnly || ref.RPM == nil {
		t.Errorf("reference server's result: rtt_only %v, rpm %+v", ref.RTTOnly, ref.RPM)
	}
	sameGrades(t, ref, grade["sqmkit serve"])

	// The router build speaks HTTP/1.1 to the same nginx (its TLS and
	// HTTP/1.1 client, no HTTP/2): the same letters, and it says
	// what it cannot measure.
	const routerName = "reference server, router build"
	onRouter := gradeEach(t, cli, buildSqmkit(t, "router"), map[string][]string{routerName: {url, "--rpm-insecure"}}, nil)[routerName]
	if !onRouter.RTTOnly || onRouter.RPM != nil || !strings.Contains(strings.Join(onRouter.Notes, " "), "over HTTP/1.1") {
		t.Errorf("router build against the reference server: rtt_only %v, rpm %+v, notes %q", onRouter.RTTOnly, onRouter.RPM, onRouter.Notes)
	}
	sameGrades(t, onRouter, grade["sqmkit serve"])

	compareRPM(t, srv, cli, goresp, bin, url, dir)
}

// compareRPM: the RPM as the draft measures it (a connection added every
// interval, to stability): goresponsiveness, then sqmkit test --rpm held to
// the connections it ended with in each direction, one after the other on
// the same path, both endpoints' backlogs kept small as the draft asks
// (refserver.Compare, GoresponsivenessArgs, EndpointLowat, ClientGSOMax).
func compareRPM(t *testing.T, srv, cli *tctest.Netns, goresp, bin, url, dir string) {
	t.Helper()
	// goresponsiveness aggregates as the draft's earlier versions did, the
	// mean of the foreign and the loaded latencies; sqmkit follows the
	// current text, the mean of the two rates (docs/commands.md,
	// "Responsiveness (RPM)"), so sqmkit's latencies are also aggregated
	// as goresponsiveness does. make lab holds that figure to the issue's
	// refserver.Band (lab/rpm.go, rpmChecks); a single run here can land
	// just past it (docs/results.md), so this test fails at twice the band:
	// a load, a stop or an aggregation that is not the draft's, or a
	// server's backlog left to grow.
	srv.Exec(t, "sysctl", "-qw", refserver.EndpointLowat)
	cli.Exec(t, "sysctl", "-qw", refserver.EndpointLowat)
	cli.Exec(t, "ip", "link", "set", cli.Dev, "gso_max_size", refserver.ClientGSOMax)
	run := func(argv ...string) (string, error) {
		b, err := exec.Command("ip", append([]string{"netns", "exec", cli.Name}, argv...)...).CombinedOutput()
		return string(b), err
	}
	// the two clients run one after the other, so a host that takes CPU
	// from one of them moves its RPM alone (make harsh's busy loops did,
	// once in five); one pair outside the band is measured again and the
	// retry is reported, two fail (make lab's rpm judges the band under
	// its noise gate)
	for attempt := 1; ; attempt++ {
		c, err := refserver.Compare(run, goresp, bin, url, "", nil)
		for _, o := range c.Outputs {
			t.Logf("%s:\n%s", o.Name, o.Text)
		}
		if err != nil {
			t.Fatal(err)
		}
		outside, compared := judgeRPM(t, c)
		switch {
		case compared == 0:
			t.Skip("goresponsiveness measured neither direction under load: nothing to compare")
		case len(outside) == 0:
			return
		case attempt == 1:
			tctest.Absorbed(t, "the RPM of one pair of runs was outside ±%.0f %% (%s): measured again", 200*refserver.Band, strings.Join(outside, "; "))
			continue
		}
		for _, msg := range outside {
			t.Errorf("%s, outside ±%.0f %% in two pairs of runs\nnginx:\n%s", msg, 200*refserver.Band, refserver.Log(dir))
		}
		return
	}
}

// judgeRPM compares each direction goresponsiveness measured under load:
// the directions outside twice refserver.Band, and how many it compared.
func judgeRPM(t *testing.T, c refserver.Comparison) (outside []string, compared int) {
	t.Helper()
	for i, st := range c.Ours {
		want, got := c.Theirs[i], st.EarlierDraft()
		if !want.Measured() {
			// as make lab's rpmChecks: unproven, not failed
			t.Logf("%s: not compared: goresponsiveness measured no loaded link (its load generator gave up, or its last window held no probe)", st.Direction)
			continue
		}
		compared++
		ratio := got / want.RPM
		msg := fmt.Sprintf("%s: goresponsiveness %.0f RPM on %d connections, keeping %d of the %d probe rounds of its final window; sqmkit's latencies aggregated as goresponsiveness does: %.0f RPM on %d (%+.0f %%)",
			st.Direction, want.RPM, want.Conns, want.Kept, want.Rounds, got, st.Conns, 100*(ratio-1))
		if !refserver.Within(ratio, 2*refserver.Band) {
			outside = append(outside, msg)
			continue
		}
		t.Logf("%s; within the issue's ±%.0f %%: %v", msg, 100*refserver.Band, refserver.Within(ratio, refserver.Band))
	}
	return outside, compared
}

// TestJudgeRPM: what TestReferenceResponsivenessServer retries on and
// fails on: a direction outside twice the band, and none measured.
func TestJudgeRPM(t *testing.T) {
	ours := refserver.Stage{TCP: 600, TLS: 600, GET: 600, Load: 600} // 100 RPM as goresponsiveness aggregates
	down, up := ours, ours
	down.Direction, up.Direction = "download", "upload"
	for _, tc := range []struct {
		name             string
		theirs           [2]refserver.Theirs
		outside, compare int
	}{
		{"both agree", [2]refserver.Theirs{{RPM: 100, Conns: 4}, {RPM: 110, Conns: 4}}, 0, 2},
		{"download off", [2]refserver.Theirs{{RPM: 60, Conns: 4}, {RPM: 100, Conns: 4}}, 1, 2},
		{"upload unmeasured", [2]refserver.Theirs{{RPM: 100, Conns: 4}, {RPM: 30}}, 0, 1},
	} {
		outside, compared := judgeRPM(t, refserver.Comparison{Ours: [2]refserver.Stage{down, up}, Theirs: tc.theirs})
		if len(outside) != tc.outside || compared != tc.compare {
			t.Errorf("%s: %d outside (%q), %d compared; want %d, %d", tc.name, len(outside), outside, compared, tc.outside, tc.compare)
		}
	}
}
