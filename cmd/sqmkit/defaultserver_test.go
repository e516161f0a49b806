//go:build !router

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/report"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestDefaultServerImpersonated: the path a user takes by default. With no
// server named, `sqmkit test` (the full build over HTTP/2, the router build
// over HTTP/1.1) goes to the compiled-in public server by its name, over
// TLS checked against the system's CA bundle; here that name resolves,
// inside the client's namespace only, to the reference responsiveness
// server past a bloated modem, whose certificate a CA of the test's own
// signed (refserver.WritePublic, Confined). $SQMKIT_SERVER and a queue's
// option test_server, each a sqmkit serve, then take the test there (its
// one-way split says so). Nothing here could reach the real host: the
// namespaces have no route out and resolve no other name.
func TestDefaultServerImpersonated(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		tctest.Missing(t, "nginx not installed (scripts/deps.sh installs it)")
	}
	srv, cli := bloatedPath(t, "dp", 88)
	full, router := buildSqmkit(t), buildSqmkit(t, "router")
	dir := t.TempDir()
	pub, err := refserver.WritePublic(dir, srv.Addr, "127.0.0.1:4043")
	if err != nil {
		t.Fatal(err)
	}
	serveRPM(t, srv, full, srv.Addr+":8693", "127.0.0.1:4043") // a sqmkit serve, and /slurp's backend
	ng := exec.Command("ip", append([]string{"netns", "exec", srv.Name}, refserver.Command(nginx, dir)...)...)
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ng.Process.Signal(syscall.SIGTERM); ng.Wait() }()
	if err := tctest.WaitListening(srv.Name, "tcp", pub.Port, 10*time.Second); err != nil {
		t.Fatalf("%v\nnginx:\n%s", err, refserver.Log(dir))
	}
	// a router's config whose queue names the sqmkit serve as its test_server
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface '"+cli.Dev+
		"'\n\toption download '20000'\n\toption upload '20000'\n\toption test_server '"+srv.Addr+"'\n"), 0o644)
	for _, c := range []struct {
		name, bin string
		env       []string
		args      []string
		server    string // the result's server
		addr      string // where it went
		oneWay    bool   // a sqmkit serve's one-way split
	}{
		{"full build, no server", full, nil, nil, pub.URL, srv.Addr + ":443", false},
		{"router build, no server", router, nil, nil, pub.URL, srv.Addr + ":443", false},
		{"$SQMKIT_SERVER", full, []string{"SQMKIT_SERVER=" + srv.Addr}, nil, srv.Addr, srv.Addr + ":8693", true},
		{"option test_server", router, nil, []string{"--root", root, "--any-route"}, srv.Addr, srv.Addr + ":8693", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "r.json")
			argv := append([]string{"env"}, c.env...)
			argv = append(argv, c.bin, "test", "--quiet", "--idle", "1s", "--download", "3s", "--upload", "3s", "--bidir", "0", "--json", js)
			argv = append(argv, c.args...)
			cmd := exec.Command("ip", append([]string{"netns", "exec", cli.Name}, refserver.Confined(pub.Client, argv)...)...)
			cmd.Env = append(os.Environ(), "SQMKIT_SERVER=") // the host's own never leaks in
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s\nnginx:\n%s", err, b, refserver.Log(dir))
			}
			res, err := report.ReadJSON(reporttest.Open(t, js))
			if err != nil {
				t.Fatal(err)
			}
			note := strings.Join(res.Notes, "\n")
			switch {
			case res.Server != c.server || res.ServerAddr != c.addr:
				t.Errorf("measured against %s at %s, want %s at %s\n%s", res.Server, res.ServerAddr, c.server, c.addr, b)
			case res.Incomplete != "" || res.Grades.DSLReports == "":
				t.Errorf("not graded: %s\n%s", res.Incomplete, b)
			case !strings.Contains(note, "no SERVER given: measured against "+c.server):
				t.Errorf("the notes do not name the default it took:\n%s", note)
			case c.oneWay == res.RTTOnly:
				t.Errorf("rtt_only %v, want a one-way split %v", res.RTTOnly, c.oneWay)
			}
			if c.server == bbproto.DefaultPublicServer && res.Grades.Basis != bbresult.BasisHandshakes {
				t.Errorf("graded on %s", res.Grades.Basis)
			}
		})
	}
}
