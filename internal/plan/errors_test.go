package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

func TestBuildErrors(t *testing.T) {
	eth := linkinfo.Facts{MTU: 1500, Proto: "dhcp"}
	for _, tc := range []struct {
		name string
		mod  func(*config.Queue, *linkinfo.Facts)
		want []string // substrings: the field and the fix
	}{
		{"slow upload", func(q *config.Queue, _ *linkinfo.Facts) { q.Upload = 50 }, []string{"upload:", "64 kbit/s", "set 0"}},
		{"negative download", func(q *config.Queue, _ *linkinfo.Facts) { q.Download = -1 }, []string{"download:", "use 0"}},
		{"rate in bit/s", func(q *config.Queue, _ *linkinfo.Facts) { q.Download = 300_000_000 }, []string{"download:", "kbit/s"}},
		{"nothing to shape", func(q *config.Queue, _ *linkinfo.Facts) { q.Upload, q.Download = 0, 0 }, []string{"download:", "both 0", "set option download"}},
		{"atm on nss", func(q *config.Queue, _ *linkinfo.Facts) { q.LinkLayer = config.LinkATM }, []string{"linklayer:", "nss", "overhead", "about 85 %", "sqmkit tune finds"}},
		{"unknown linklayer", func(q *config.Queue, _ *linkinfo.Facts) { q.LinkLayer = "ptm" }, []string{"linklayer:", "none, ethernet or atm"}},
		{"wireguard kind on nss", func(_ *config.Queue, f *linkinfo.Facts) { f.Kind = "wireguard" }, []string{"wireguard", "cake or fq_codel"}},
		{"wireguard proto on nss", func(_ *config.Queue, f *linkinfo.Facts) { f.Proto = "wireguard" }, []string{"wireguard", "NSS"}},
		{"no backend", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend = "" }, []string{"backend:", "--backend"}},
		{"bad backend", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend = "hfsc" }, []string{"backend:", "nss, cake or fq_codel"}},
		{"overhead range", func(q *config.Queue, _ *linkinfo.Facts) { q.Overhead = 300 }, []string{"overhead:", "-64..256", "set option overhead"}},
		{"no interface", func(q *config.Queue, _ *linkinfo.Facts) { q.Interface = "" }, []string{"interface:", "set option interface"}},
		{"long interface", func(q *config.Queue, _ *linkinfo.Facts) { q.Interface = "abcdefghijklmnop" }, []string{"interface:", "15 bytes"}},
		{"bad ifb", func(q *config.Queue, _ *linkinfo.Facts) { q.IFB = "ifb/0" }, []string{"ifb:", "not a valid Linux device name"}},
		{"bad etarget", func(q *config.Queue, _ *linkinfo.Facts) { q.ETarget = "fast" }, []string{"etarget:", "5ms", "auto"}},
		{"missing value", func(q *config.Queue, _ *linkinfo.Facts) { q.EQdiscOpts = "interval" }, []string{"eqdisc_opts:", "needs a value"}},
		{"bad limit", func(q *config.Queue, _ *linkinfo.Facts) { q.IQdiscOpts = "limit lots" }, []string{"iqdisc_opts:", "limit"}},
		{"target above interval", func(q *config.Queue, _ *linkinfo.Facts) { q.EQdiscOpts = "target 200ms" }, []string{"target 200ms", "interval 100ms", "lower the target"}},
		{"accel_mode", func(q *config.Queue, _ *linkinfo.Facts) { q.EQdiscOpts = "accel_mode 1" }, []string{"eqdisc_opts:", "accel_mode 0"}},
		{"shell chars", func(q *config.Queue, _ *linkinfo.Facts) { q.EQdiscOpts = "quantum 300;reboot" }, []string{"eqdisc_opts:", "';'"}},
		{"hash in device", func(q *config.Queue, _ *linkinfo.Facts) { q.Interface = "wan#1" }, []string{"interface:", "'#'", "rename"}},
		{"huge limit", func(q *config.Queue, _ *linkinfo.Facts) { q.IQdiscOpts = "limit 99999999999" }, []string{"iqdisc_opts:", "limit", "1..1073741824"}},
		{"huge mtu", func(_ *config.Queue, f *linkinfo.Facts) { f.MTU = 1 << 62 }, []string{"mtu:", "65536"}},
		{"negative elimit", func(q *config.Queue, _ *linkinfo.Facts) { q.ELimit = -5 }, []string{"elimit:", "use 0"}},
		{"tiny mtu", func(_ *config.Queue, f *linkinfo.Facts) { f.MTU = 40 }, []string{"mtu:", "68"}},
		{"cake diffserv", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend, q.Diffserv = config.Cake, "diffserv9" }, []string{"diffserv:", "diffserv4"}},
		{"cake rtt", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend, q.RTT = config.Cake, "far" }, []string{"rtt:", "internet"}},
	} {
		q, f := baseQueue(config.NSS, "wan", 100000), eth
		tc.mod(&q, &f)
		p, err := Build(q, f)
		if err == nil {
			t.Errorf("%s: no error, plan %+v", tc.name, p)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}
}

func TestAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*config.Queue, *linkinfo.Facts)
	}{
		{"wireguard on cake", func(q *config.Queue, f *linkinfo.Facts) { q.Backend, f.Kind = config.Cake, "wireguard" }},
		{"atm on fq_codel", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend, q.LinkLayer = config.FQCodel, config.LinkATM }},
		{"negative overhead", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend, q.Overhead = config.Cake, -4 }},
		{"minimum rate", func(q *config.Queue, _ *linkinfo.Facts) { q.Upload, q.Download = 64, 0 }},
		{"rtt with keyword", func(q *config.Queue, _ *linkinfo.Facts) { q.Backend, q.RTT = config.Cake, "rtt 50ms" }},
	} {
		q, f := baseQueue(config.NSS, "wan", 100000), linkinfo.Facts{MTU: 1500}
		tc.mod(&q, &f)
		if _, err := Build(q, f); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// Every option error is a *config.FieldError naming the option, with the
// file line that set it when it came from a file: no message is parsed to
// find the option to blame.
func TestFieldErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sqm")
	if err := os.WriteFile(file, []byte("config queue 'wan'\n\toption interface 'wan'\n\toption upload '9500'\n\toption eqdisc_opts 'target 200ms'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, err := config.Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(qs[0], linkinfo.Facts{MTU: 1500})
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Option != "eqdisc_opts" || fe.Value != "target 200ms" || fe.Origin != file+":4" || !strings.Contains(fe.Fix, "--eqdisc-opts") {
		t.Errorf("error %v (%+v), want eqdisc_opts from %s:4", err, fe, file)
	}
	// a device fact is blamed on the device, never on an option
	q := baseQueue(config.NSS, "wan", 100000)
	if _, err := Build(q, linkinfo.Facts{MTU: 1 << 62}); errors.As(err, &fe) || !strings.Contains(err.Error(), "device wan reports MTU") {
		t.Errorf("huge MTU: %v", err)
	}
}
