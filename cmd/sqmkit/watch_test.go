package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatchList: the watch runs for the enabled queues autorate does not
// follow and option watch does not turn off, shaped both ways; its flags
// are checked before anything runs.
func TestWatchList(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	q := func(name, iface, extra string) string {
		return "config queue '" + name + "'\n\toption enabled '1'\n\toption interface '" + iface + "'\n\toption download '20000'\n\toption upload '10000'\n" + extra
	}
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(q("wan", "wan", "")+q("lte", "wwan0", "\toption autorate '1'\n")+q("off", "eth9", "\toption watch '0'\n")), 0o644)
	var out, errb bytes.Buffer
	if code := runWatch([]string{"--root", root, "--list"}, &out, &errb); code != 0 || out.String() != "wan\n" {
		t.Errorf("list: exit %d, %q %q", code, out.String(), errb.String())
	}
	for _, args := range [][]string{{"--quiet-hours", "5:3"}, {"--probe-interval", "1ms"}, {"--window", "10s"}, {"a", "b"}} {
		var out, errb bytes.Buffer
		if code := runWatch(append([]string{"--root", root}, args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), "sqmkit watch:") {
			t.Errorf("%q: exit %d, %q", args, code, errb.String())
		}
	}
}
