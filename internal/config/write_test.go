package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func TestWriteRates(t *testing.T) {
	for _, tc := range []struct {
		name, in, section, want string
		old                     Rates
	}{
		{"named, comments kept", `# my router
config queue 'eth1'
	option enabled '1'
	# measured 2026-11
	option download '85000'
	option upload   "10000"
	option interface 'eth1'

config queue 'other'
	option download '1'
`, "eth1", `# my router
config queue 'eth1'
	option enabled '1'
	# measured 2026-11
	option download '81234'
	option upload '9876'
	option interface 'eth1'

config queue 'other'
	option download '1'
`, Rates{85000, 10000}},
		{"anonymous, options missing", `config queue
	option interface 'wan'
`, "@queue[0]", `config queue
	option download '81234'
	option upload '9876'
	option interface 'wan'
`, Rates{}},
		{"indented with spaces", "config queue 'q'\n    option download 1\n    option upload 2\n", "q",
			"config queue 'q'\n    option download '81234'\n    option upload '9876'\n", Rates{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sqm")
			os.WriteFile(path, []byte(tc.in), 0o600)
			old, err := WriteRates("", path, tc.section, Rates{81234, 9876})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if old != tc.old {
				t.Errorf("old %+v, want %+v", old, tc.old)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v", fi.Mode())
			}
		})
	}
	path := filepath.Join(t.TempDir(), "sqm")
	os.WriteFile(path, []byte("config queue 'a'\n"), 0o644)
	if _, err := WriteRates("", path, "b", Rates{10000, 2000}); err == nil || !strings.Contains(err.Error(), `no queue section "b"`) {
		t.Errorf("missing section: %v", err)
	}
}

// Rates that the config would refuse are not written: both 0 would stop
// shaping, and a negative or absurd rate would break the next start.
func TestWriteRatesRefusesBadRates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sqm")
	in := "config queue 'q'\n\toption download '20000'\n\toption upload '10000'\n"
	os.WriteFile(path, []byte(in), 0o644)
	for _, r := range []Rates{{0, 0}, {-5, 999999999999}, {20000, -1}, {10, 10000}} {
		if _, err := WriteRates("", path, "q", r); err == nil || !strings.Contains(err.Error(), "not a rate to write") && !strings.Contains(err.Error(), "both 0") {
			t.Errorf("WriteRates(%+v): %v", r, err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != in {
		t.Errorf("the file changed: %q", b)
	}
}

// A symlinked config is written through the link (the link stays), and a
// write that fails for want of space leaves the file as it was and no
// temporary file.
func TestWriteRatesSymlinkAndFullDisk(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "overlay", "sqm")
	os.MkdirAll(filepath.Dir(target), 0o755)
	in := "config queue 'q'\n\toption download '20000'\n\toption upload '10000'\n"
	os.WriteFile(target, []byte(in), 0o644)
	link := filepath.Join(dir, "sqm")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteRates("", link, "q", Rates{30000, 12000}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), "'30000'") {
		t.Errorf("the link's target was not written: %q", b)
	}

	if os.Geteuid() != 0 {
		tctest.Missing(t, "the full-disk case needs root to mount a small tmpfs")
	}
	full := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", full).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", full).Run()
	path := filepath.Join(full, "sqm")
	os.WriteFile(path, []byte(in), 0o644)
	filler, _ := os.Create(filepath.Join(full, "filler"))
	filler.Write(make([]byte, 64<<10)) // fills it up
	filler.Close()
	if _, err := WriteRates("", path, "q", Rates{30000, 12000}); err == nil {
		t.Fatal("a write to a full filesystem succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != in {
		t.Errorf("the config changed: %q", b)
	}
	if _, err := os.Stat(path + ".sqmkit-tune"); err == nil {
		t.Error("a temporary file was left behind")
	}
}
