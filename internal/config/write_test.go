package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if _, err := WriteRates("", path, "b", Rates{1, 2}); err == nil || !strings.Contains(err.Error(), `no queue section "b"`) {
		t.Errorf("missing section: %v", err)
	}
}
