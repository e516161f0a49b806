//go:build !router

package main

import (
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
// `sqmkit test --rpm` then measure the RPM against the same server, and the
// log sets their figures side by side (docs/results.md: where they differ,
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
	time.Sleep(time.Second)
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

	// The RPM as the draft measures it (a connection added every interval,
	// to stability), per direction: goresponsiveness, then sqmkit test
	// --rpm, one after the other on the same path.
	// goresponsiveness aggregates as the draft's earlier versions did, the
	// mean of the foreign and the loaded latencies; sqmkit follows the
	// current text, the mean of the two rates (docs/commands.md,
	// "Responsiveness (RPM)"), so sqmkit's latencies are also aggregated
	// as goresponsiveness does.
	cli.Exec(t, "sysctl", "-qw", refserver.ClientLowat)
	out, err := exec.Command("ip", append([]string{"netns", "exec", cli.Name, goresp}, refserver.GoresponsivenessArgs(url)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("goresponsiveness: %v\n%s", err, out)
	}
	down, up, err := refserver.Goresponsiveness(out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command("ip", "netns", "exec", cli.Name, bin, "test", "--rpm", url, "--rpm-insecure", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("sqmkit test --rpm: %v\n%s", err, b)
	}
	t.Logf("goresponsiveness:\n%s\nsqmkit test --rpm:\n%s", out, b)
	ours, err := refserver.Stages(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{down.RPM, up.RPM} {
		got := ours[i].EarlierDraft()
		t.Logf("%s: goresponsiveness %.0f RPM; sqmkit's latencies aggregated as goresponsiveness does: %.0f RPM (%+.0f %%)", ours[i].Direction, want, got, 100*(got/want-1))
	}
}
