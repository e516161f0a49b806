package testrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/joblock"
)

// TestResolve: with no server, a test or tune measures against
// SQMKIT_SERVER, else the router's configured test_server, else the public
// one, and says which; a bad configured one is refused with its option.
func TestResolve(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	conf := func(server string) {
		os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n\toption download '20000'\n\toption upload '10000'\n\toption test_server '"+server+"'\n"), 0o644)
	}
	for _, c := range []struct{ env, configured, want string }{
		{"", "", bbproto.DefaultPublicServer},
		{"", "https://192.0.2.9/config", "https://192.0.2.9/config"},
		{"192.0.2.7", "https://192.0.2.9/config", "192.0.2.7"},
	} {
		t.Setenv("SQMKIT_SERVER", c.env)
		conf(c.configured)
		qs, _ := RouterQueues(root)
		sv, err := Resolve("", qs)
		if err != nil || sv.Addr != c.want || !sv.Public || !strings.Contains(sv.Note(), c.want) {
			t.Errorf("env %q, test_server %q: %+v %v, want %s", c.env, c.configured, sv, err, c.want)
		}
	}
	t.Setenv("SQMKIT_SERVER", "")
	if sv, err := Resolve("192.0.2.1:5000", nil); err != nil || sv.Public || sv.Note() != "" {
		t.Errorf("a named server: %+v %v", sv, err)
	}
	conf("--json=/etc/passwd")
	if _, err := config.Resolve(root, "", nil, ""); err == nil || !strings.Contains(err.Error(), "test_server") {
		t.Errorf("a hostile test_server: %v", err)
	}
}

// TestHold: on a router a test holds its enabled queues' job
// locks, so it is refused while a tune moves their rates, saying so.
func TestHold(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n\toption download '20000'\n\toption upload '10000'\n"), 0o644)
	tune, err := joblock.Take(joblock.QueueDir(root), joblock.QueueName("wan"), joblock.Holder{Kind: "tune", PID: 9, What: "wan"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Hold(root, "test", "vps.example"); err == nil || !strings.Contains(err.Error(), "a tune is running (wan)") {
		t.Errorf("a test while a tune runs: %v", err)
	}
	tune.Release()
	release, err := Hold(root, "test", "vps.example")
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := joblock.Held(joblock.QueueDir(root), joblock.QueueName("wan")); !ok || h.Kind != "test" {
		t.Errorf("the test does not hold the queue: %+v %v", h, ok)
	}
	release()
}
