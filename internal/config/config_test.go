package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const router = "testdata/router"

func TestLoadLuCIFile(t *testing.T) {
	qs, err := Load(router, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Queue{
		{
			Section: "eth1", Enabled: true, Interface: "wan", Download: 285000, Upload: 142500,
			Backend: NSS, Script: "nss-zk.qos", Qdisc: "fq_codel", LinkLayer: LinkNone,
			QdiscAdvanced: true, SquashDSCP: true, SquashIngress: true, IngressECN: true, EgressECN: false,
			QdiscReallyReallyAdvanced: true, ITarget: "4ms", ETarget: "4ms",
			IQdiscOpts: "interval 50ms quantum 304", EQdiscOpts: "interval 50ms quantum 304", Verbosity: 5,
			Notes: []string{"script=nss-zk.qos -> backend nss"},
		},
		{
			Section: "cfg02b68a", Interface: "eth0.2", Download: 85000, Upload: 10000,
			Backend: Cake, Script: "piece_of_cake.qos", Qdisc: "cake", LinkLayer: LinkEthernet, Overhead: 34,
			LinkLayerAdvanced: true, TcMTU: 2047, TcTSIZE: 128, TcMPU: 64, LinkLayerAdaptation: "default",
			IngressECN: true, Diffserv: "besteffort",
			Notes: []string{"script=piece_of_cake.qos -> backend cake"},
		},
		{
			Section: "lab", Enabled: true, Interface: "veth0", Download: 50000,
			Backend: Cake, Script: "layer_cake.qos", Qdisc: "cake", LinkLayer: LinkNone,
			IngressECN: true, Diffserv: "diffserv3", RTT: "metro", IFB: "ifb-lab",
			Notes: []string{"script=layer_cake.qos -> backend cake"},
		},
	}
	if o := qs[0].Origin("download"); o != "testdata/router/etc/config/sqm:5" {
		t.Errorf("origin of eth1's download = %q, want its file line", o)
	}
	for i := range qs {
		qs[i].origin = nil
	}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", qs, want)
	}
	for _, q := range qs {
		if err := q.Validate(); err != nil {
			t.Errorf("Validate(%s): %v", q.Section, err)
		}
	}
}

// section writes one queue section with the given option lines and loads it.
func loadOne(t *testing.T, opts string) (Queue, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sqm")
	body := "config queue 'q'\n\toption interface 'eth0'\n\toption download '1000'\n" + opts
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, err := Load("/nonexistent", p)
	if err != nil {
		return Queue{}, err
	}
	return qs[0], qs[0].Err
}

func TestDefaultsAndBackends(t *testing.T) {
	tests := []struct {
		opts     string
		backend  Backend
		diffserv string
		note     string
	}{
		{"", FQCodel, "", "no script: sqm-scripts' default simple.qos -> backend fq_codel"},
		{"option qdisc 'cake'\n", Cake, "", "simple.qos qdisc=cake -> backend cake"},
		{"option script 'simple.qos'\noption qdisc 'cake'\n", Cake, "", "qdisc=cake -> backend cake"},
		{"option script 'simplest.qos'\noption qdisc 'fq_codel'\n", FQCodel, "", "script=simplest.qos -> backend fq_codel"},
		{"option script 'simplest_tbf.qos'\n", FQCodel, "", "-> backend fq_codel"},
		{"option script 'simple.qos'\noption qdisc 'sfq'\n", FQCodel, "", "qdisc sfq is not supported"},
		{"option script 'nss.qos'\n", NSS, "", "backend nss"},
		{"option script 'nss-rk.qos'\noption qdisc 'cake'\n", NSS, "", "qdisc cake ignored"},
		{"option script 'layer_cake.qos'\n", Cake, "diffserv3", "backend cake"},
		{"option script 'layer_cake.qos'\noption diffserv 'diffserv4'\n", Cake, "diffserv4", "backend cake"},
		{"option script 'piece_of_cake.qos'\n", Cake, "besteffort", "backend cake"},
		{"option script 'nss-zk.qos'\noption backend 'CAKE'\n", Cake, "", "backend=cake (option backend)"},
	}
	for _, tt := range tests {
		q, err := loadOne(t, tt.opts)
		if err != nil {
			t.Errorf("%q: %v", tt.opts, err)
			continue
		}
		if q.Backend != tt.backend || q.Diffserv != tt.diffserv || !strings.Contains(strings.Join(q.Notes, "\n"), tt.note) {
			t.Errorf("%q: backend %s diffserv %q notes %q; want %s %q note %q", tt.opts, q.Backend, q.Diffserv, q.Notes, tt.backend, tt.diffserv, tt.note)
		}
		if q.Enabled || !q.IngressECN || q.EgressECN || q.LinkLayer != LinkNone {
			t.Errorf("%q: defaults enabled=%v iecn=%v eecn=%v linklayer=%s; want false true false none", tt.opts, q.Enabled, q.IngressECN, q.EgressECN, q.LinkLayer)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ opts, want string }{
		{"\toption upload 'fast'\n", `:4: sqm.q.upload: "fast" is not a number of kbit/s (set option upload '9500' or --upload 9500)`},
		{"\toption upload '-5'\n", `sqm.q.upload: -5 kbit/s is negative`},
		{"\toption ingress_ecn 'yes'\n", `:4: sqm.q.ingress_ecn: "yes" is not ECN or NOECN (set option ingress_ecn 'ECN' or --ingress-ecn ECN)`},
		{"\toption egress_ecn 'maybe'\n", `sqm.q.egress_ecn: "maybe" is not ECN or NOECN`},
		{"\toption ilimit '1k'\n", `sqm.q.ilimit: "1k" is not a whole number`},
		{"\toption elimit '-1'\n", `sqm.q.elimit: -1 is negative`},
		{"\toption tcMPU 'x'\n", `sqm.q.tcMPU: "x" is not a whole number (set option tcMPU '64' or --mpu 64)`},
		{"\toption script 'fancy.qos'\n", `:4: sqm.q.script: "fancy.qos" is not a known sqm-scripts script (known: layer_cake.qos, nss-rk.qos, nss-zk.qos, nss.qos, piece_of_cake.qos, simple.qos, simplest.qos, simplest_tbf.qos, sqmkit-cake.qos, sqmkit-fq_codel.qos, sqmkit-nss.qos)`},
		{"\tlist upload '1'\n\tlist upload '2'\n", `:5: sqm.q.upload: "1 2" is not a number of kbit/s`},
		{"\toption upload '1\n", `:4: unterminated ' quote`},
		{"\toption autorate_max_download 'lots'\n", `:4: sqm.q.autorate_max_download: "lots" is not a number of kbit/s`},
		{"\toption autorate 'often'\n", `:4: sqm.q.autorate: "often" is not a boolean`},
	}
	for _, tt := range tests {
		_, err := loadOne(t, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want it to contain %q", tt.opts, err, tt.want)
		}
	}
	if _, err := Load("testdata/nothing-here", ""); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "testdata/nothing-here/etc/config/sqm") {
		t.Errorf("missing file: %v", err)
	}
}

// TestBadSectionAlone: a mistake stops its own section only, as sqm-scripts
// reads the file: a list of qdisc options reads as its values joined (as
// config_get gives them), a disabled section's mistake stops nothing, an
// enabled one's is refused with its line and fix while the others resolve.
func TestBadSectionAlone(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sqm")
	os.WriteFile(p, []byte(`config queue 'good'
	option enabled '1'
	option interface 'eth0'
	option download '20000'
	option upload '10000'
	list eqdisc_opts 'interval 50ms'
	list eqdisc_opts 'quantum 304'

config queue 'off'
	option enabled '0'
	option interface 'eth2'
	option upload 'fast'

config queue 'bad'
	option enabled '1'
	option interface 'eth1'
	option download 'lots'
`), 0o644)
	qs, err := Resolve("/nonexistent", p, nil, "")
	var bad *BadSections
	if !errors.As(err, &bad) || len(bad.Sections) != 1 || bad.Sections[0] != "bad" || !strings.Contains(err.Error(), ":17: sqm.bad.download") {
		t.Fatalf("error %v, want section bad alone refused with its line", err)
	}
	if len(qs) != 1 || qs[0].Section != "good" || qs[0].EQdiscOpts != "interval 50ms quantum 304" {
		t.Errorf("queues %+v, want good with its list joined", qs)
	}
	if _, err := Resolve("/nonexistent", p, nil, "bad"); err == nil {
		t.Error("the bad section named alone resolved")
	}
	if qs, err := Resolve("/nonexistent", p, nil, "good"); err != nil || len(qs) != 1 {
		t.Errorf("good named alone: %v %v", qs, err)
	}
}

// TestEnabledAsSQMScripts: sqm-scripts turns a queue on only with '1'
// ([ "$enabled" -eq 1 ]), so 'yes' and 'on', which libuci's booleans take,
// leave it off here too, with a note; sqmkit's own switches keep libuci's.
func TestEnabledAsSQMScripts(t *testing.T) {
	for v, on := range map[string]bool{"1": true, "01": true, "0": false, "yes": false, "on": false, "true": false, "2": false} {
		q, err := loadOne(t, "\toption enabled '"+v+"'\n\toption autorate 'yes'\n\toption upload '1000'\n")
		if err != nil || q.Enabled != on || !q.Autorate {
			t.Errorf("enabled %q: %v, enabled %v autorate %v; want enabled %v, autorate on", v, err, q.Enabled, q.Autorate, on)
		}
		if _, err := strconv.Atoi(v); err != nil && !strings.Contains(strings.Join(q.Notes, " "), "reads as off") {
			t.Errorf("enabled %q: no note saying it is off: %q", v, q.Notes)
		}
	}
}

func TestSelect(t *testing.T) {
	qs, err := Load(router, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg  string
		want []string // sections
		err  string
	}{
		{"", []string{"eth1", "lab"}, ""},
		{"eth1", []string{"eth1"}, ""},
		{"wan", []string{"eth1"}, ""},
		{"eth0.2", []string{"cfg02b68a"}, ""}, // disabled, but named explicitly
		{"@queue[1]", []string{"cfg02b68a"}, ""},
		{"@queue[-1]", []string{"lab"}, ""},
		{"eth9", nil, `no queue section or interface "eth9" (fix: name one of: eth1 (interface wan, enabled), cfg02b68a (interface eth0.2, disabled), lab (interface veth0, enabled))`},
		{"@queue[7]", nil, "no queue section or interface"},
	}
	for _, tt := range tests {
		got, err := Select(qs, tt.arg)
		var names []string
		for _, q := range got {
			names = append(names, q.Section)
		}
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Select(%q) error %v, want %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(names, tt.want) {
			t.Errorf("Select(%q) = %v, %v; want %v", tt.arg, names, err, tt.want)
		}
	}
	if _, err := Select(qs[1:2], ""); !errors.Is(err, ErrNoneEnabled) {
		t.Errorf("Select with none enabled: %v, want ErrNoneEnabled", err)
	}
}

func TestLoadAutorate(t *testing.T) {
	q, err := loadOne(t, "\toption autorate '1'\n\toption autorate_min_download '4000'\n\toption autorate_max_upload '30000'\n"+
		"\toption autorate_server '192.0.2.7:5201'\n\toption autorate_reflectors '9.9.9.9 1.1.1.1'\n")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Autorate || q.AutorateMin.Download != 4000 || q.AutorateMax.Upload != 30000 || q.AutorateServer != "192.0.2.7:5201" || q.AutorateReflectors != "9.9.9.9 1.1.1.1" {
		t.Errorf("%+v", q)
	}
}

func TestAutorateBounds(t *testing.T) {
	q := Queue{Download: 40000, Upload: 200}
	lo, hi := q.AutorateBounds()
	if lo != (Rates{Download: 8000, Upload: MinRateKbit}) || hi != (Rates{Download: 80000, Upload: 400}) {
		t.Errorf("defaults: %+v %+v", lo, hi)
	}
	// a default ceiling never fails validation, however fast the base
	fast := Queue{Section: "wan", Interface: "eth0", Download: 60_000_000, Upload: 1000, Backend: Cake, LinkLayer: LinkNone}
	if _, hi := fast.AutorateBounds(); hi.Download != MaxRateKbit {
		t.Errorf("ceiling of a 60 Gbit/s base: %d", hi.Download)
	}
	if err := fast.Validate(); err != nil {
		t.Errorf("a fast queue without autorate options: %v", err)
	}
	// bounds of a queue without autorate never stop it being shaped
	unused := fast
	unused.AutorateMax.Download = 1000
	if err := unused.Validate(); err != nil {
		t.Errorf("an unused ceiling below the rate: %v", err)
	}
	q.AutorateMin, q.AutorateMax = Rates{Download: 10000}, Rates{Upload: 300}
	lo, hi = q.AutorateBounds()
	if lo.Download != 10000 || hi.Upload != 300 || hi.Download != 80000 {
		t.Errorf("configured: %+v %+v", lo, hi)
	}
}

func TestValidate(t *testing.T) {
	ok := Queue{Section: "wan", Interface: "eth0", Download: 1000, Backend: Cake, LinkLayer: LinkNone}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid queue: %v", err)
	}
	tests := []struct {
		mod  func(q *Queue)
		want string
	}{
		{func(q *Queue) { q.Interface = "" }, "sqm.wan.interface: no interface to shape (set option interface 'eth0' or --interface eth0)"},
		{func(q *Queue) { q.Interface = "a-very-long-device-name" }, "longer than the 15 bytes"},
		{func(q *Queue) { q.Interface = "eth/0" }, "not a valid Linux device name"},
		{func(q *Queue) { q.Download = 0 }, "sqm.wan.download: download and upload are both 0, so nothing would be shaped (set option download '95000' or --download 95000)"},
		{func(q *Queue) { q.Upload = -1 }, "sqm.wan.upload: -1 kbit/s is negative"},
		{func(q *Queue) { q.Download = -1 }, "sqm.wan.download: -1 kbit/s is negative"},
		{func(q *Queue) { q.Backend = "htb" }, `sqm.wan.backend: "htb" is not a backend (use nss, cake or fq_codel) (set option backend 'cake' or --backend cake)`},
		{func(q *Queue) { q.Backend = "" }, `"" is not a backend`},
		{func(q *Queue) { q.LinkLayer = "adsl" }, `sqm.wan.linklayer: "adsl" is not a link layer (use none, ethernet or atm)`},
		{func(q *Queue) { q.Overhead = 300 }, "sqm.wan.overhead: 300 bytes is outside -64..256 (set option overhead '34' or --overhead 34)"},
		{func(q *Queue) { q.Overhead = -65 }, "outside -64..256"},
		{func(q *Queue) { q.TcMPU = 1000 }, "sqm.wan.tcMPU: 1000 bytes is outside 0..256"},
		{func(q *Queue) { q.ITarget = "5" }, `sqm.wan.itarget: "5" is neither a duration like 5ms nor auto (set option itarget '5ms' or --itarget 5ms)`},
		{func(q *Queue) { q.ETarget = "-1ms" }, `sqm.wan.etarget: "-1ms" is neither`},
		{func(q *Queue) { q.ILimit = -1 }, "sqm.wan.ilimit: -1 packets is negative"},
		{func(q *Queue) { q.ELimit = -1 }, "sqm.wan.elimit: -1 packets is negative"},
		{func(q *Queue) { q.Autorate = true }, "sqm.wan.upload: autorate follows both directions and needs both shaped"},
		{func(q *Queue) { q.Autorate, q.Upload, q.AutorateMin.Download = true, 500, 2000 }, "sqm.wan.autorate_min_download: 2000 kbit/s is above the download rate 1000 it starts from; lower it (set option autorate_min_download '10000')"},
		{func(q *Queue) { q.Autorate, q.Upload, q.AutorateMax.Upload = true, 500, 400 }, "sqm.wan.autorate_max_upload: 400 kbit/s is below the upload rate 500 it starts from; raise it"},
		{func(q *Queue) { q.Diffserv = "diffserv5" }, `sqm.wan.diffserv: "diffserv5" is not a cake diffserv mode`},
		{func(q *Queue) { q.RTT = "far" }, `sqm.wan.rtt: "far" is neither a duration like 100ms nor a preset (datacentre, lan, metro, regional, internet, oceanic, satellite, interplanetary)`},
		{func(q *Queue) { q.IFB = "ifb4averylongname" }, "sqm.wan.ifb: \"ifb4averylongname\" is longer than the 15 bytes"},
		{func(q *Queue) { q.LinkLayerAdaptation = "magic" }, `sqm.wan.linklayer_adaptation_mechanism: "magic" is unknown`},
	}
	for _, tt := range tests {
		q := ok
		tt.mod(&q)
		err := q.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", q, err, tt.want)
		}
	}
	for _, good := range []func(q *Queue){
		func(q *Queue) { q.Upload, q.Download = 1000, 0 },
		func(q *Queue) { q.ITarget, q.ETarget = "auto", "500us" },
		func(q *Queue) { q.RTT = "internet" },
		func(q *Queue) { q.RTT = "150ms" },
		func(q *Queue) { q.Overhead = -64 },
		func(q *Queue) { q.Diffserv = "diffserv8" },
	} {
		q := ok
		good(&q)
		if err := q.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", q, err)
		}
	}
}

func TestOverrides(t *testing.T) {
	parse := func(args ...string) (*Overrides, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		o := RegisterFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse("--upload", "20000", "--egress-ecn", "ecn", "--backend", "fq_codel", "--overhead", "-4", "--mpu", "68",
		"--iqdisc-opts", "quantum 300", "--ifb", "ifbx", "--rtt", "lan", "--itarget", "auto")
	if err != nil {
		t.Fatal(err)
	}
	q := Queue{Section: "s", Interface: "eth0", Download: 5000, Upload: 1, Backend: Cake, Diffserv: "diffserv4", LinkLayer: LinkNone}
	o.Apply(&q)
	want := Queue{Section: "s", Interface: "eth0", Download: 5000, Upload: 20000, Backend: FQCodel, Diffserv: "diffserv4",
		LinkLayer: LinkNone, EgressECN: true, Overhead: -4, TcMPU: 68, IQdiscOpts: "quantum 300", IFB: "ifbx", RTT: "lan", ITarget: "auto"}
	notes := q.Notes
	if o := q.Origin("tcMPU"); o != "--mpu" {
		t.Errorf("origin of tcMPU = %q, want --mpu", o)
	}
	q.Notes, q.origin = nil, nil
	if !reflect.DeepEqual(q, want) {
		t.Errorf("Apply:\n got %+v\nwant %+v", q, want)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "--upload 20000 (UCI option upload)") {
		t.Errorf("notes %q lack the upload override", notes)
	}

	// --script picks the backend again; --backend still wins over it.
	o, _ = parse("--script", "layer_cake.qos")
	q = Queue{Backend: NSS, Script: "nss-zk.qos"}
	o.Apply(&q)
	if q.Backend != Cake || q.Diffserv != "diffserv3" {
		t.Errorf("--script layer_cake.qos: backend %s diffserv %q", q.Backend, q.Diffserv)
	}
	o, _ = parse("--script", "layer_cake.qos", "--backend", "nss", "--diffserv", "besteffort")
	q = Queue{}
	o.Apply(&q)
	if q.Backend != NSS || q.Diffserv != "besteffort" {
		t.Errorf("--script with --backend/--diffserv: backend %s diffserv %q", q.Backend, q.Diffserv)
	}

	var nilO *Overrides
	nilO.Apply(&q) // commands without override flags pass nil

	for _, bad := range [][]string{
		{"--download", "fast"},
		{"--ingress-ecn", "on"},
		{"--script", "x.qos"},
		{"--ilimit", "-3"},
	} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[1]) {
			t.Errorf("%v: error %v, want one quoting the value", bad, err)
		}
	}
}

func TestResolve(t *testing.T) {
	flags := func(args ...string) *Overrides {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o := RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// The router file: flags override the selected section, then validate.
	qs, err := Resolve(router, "", flags("--download", "300000"), "wan")
	if err != nil || len(qs) != 1 || qs[0].Download != 300000 || qs[0].Upload != 142500 || qs[0].Backend != NSS {
		t.Fatalf("Resolve(router, wan) = %+v, %v", qs, err)
	}
	if _, err := Resolve(router, "", flags("--linklayer", "adsl"), ""); err == nil || !strings.Contains(err.Error(), "--linklayer: sqm.eth1.linklayer") {
		t.Errorf("invalid override: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "sqm")
	if err := os.WriteFile(bad, []byte("config queue 'wan'\n\toption interface 'wan'\n\toption upload '9500'\n\toption overhead '999'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve("", bad, nil, "wan"); err == nil || !strings.Contains(err.Error(), bad+":4: sqm.wan.overhead: 999 bytes") {
		t.Errorf("out-of-range value in the file must name its line: %v", err)
	}
	if _, err := Resolve(router, "", nil, "eth7"); err == nil || !strings.Contains(err.Error(), "testdata/router/etc/config/sqm: no queue section or interface \"eth7\"") {
		t.Errorf("unknown section: %v", err)
	}

	// A plain Linux box: no sqm file, everything from flags.
	qs, err = Resolve("testdata/plain", "", flags("--interface", "eth0", "--upload", "9500", "--download", "95000"), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Section != "eth0" || !qs[0].Enabled || qs[0].Interface != "eth0" || qs[0].Backend != FQCodel ||
		!qs[0].IngressECN || qs[0].EgressECN || qs[0].Download != 95000 {
		t.Errorf("flags-only queue: %+v", qs)
	}
	qs, err = Resolve("testdata/plain", "", flags("--upload", "9500", "--backend", "cake"), "veth1")
	if err != nil || qs[0].Interface != "veth1" || qs[0].Backend != Cake {
		t.Errorf("interface from the argument: %+v, %v", qs, err)
	}
	if _, err := Resolve("testdata/plain", "", flags("--upload", "9500", "--interface", "eth0"), "eth1"); err == nil || !strings.Contains(err.Error(), `the only queue is --interface eth0, not "eth1"`) {
		t.Errorf("argument and --interface disagree: %v", err)
	}
	if _, err := Resolve("testdata/plain", "", flags("--upload", "9500"), ""); err == nil || !strings.Contains(err.Error(), "no interface was given (fix: pass --interface") {
		t.Errorf("no interface: %v", err)
	}
	if _, err := Resolve("testdata/plain", "", flags("--interface", "eth0"), ""); err == nil || !strings.Contains(err.Error(), "both 0") {
		t.Errorf("no rates: %v", err)
	}
	// An explicit --config that does not exist is an error, not a fallback.
	if _, err := Resolve("testdata/plain", "testdata/plain/sqm", flags("--interface", "eth0", "--upload", "1"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing --config file: %v", err)
	}
}

// An option missing from its section is blamed on the section's line.
func TestMissingOptionNamesSection(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sqm")
	if err := os.WriteFile(p, []byte("# sqm\n\nconfig queue 'wan'\n\toption enabled '1'\n\toption download '1000'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve("", p, nil, "")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Option != "interface" || !strings.HasPrefix(err.Error(), p+":3: sqm.wan.interface: no interface to shape") {
		t.Errorf("error %v, want it at %s:3 naming interface", err, p)
	}
}

func TestTwoQueuesOnOneInterface(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sqm")
	body := "config queue 'a'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption download '1000'\n\n" +
		"config queue 'b'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption upload '1000'\n\n" +
		"config queue 'c'\n\toption interface 'eth1'\n\toption upload '1000'\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, err := Load("", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"", "eth1"} {
		_, err := Select(qs, arg)
		if err == nil || !strings.Contains(err.Error(), "sections a ("+p+":1) and b ("+p+":6) are both enabled for interface eth1") {
			t.Errorf("Select(%q): %v, want a refusal naming both sections", arg, err)
		}
	}
	// one of them by name, or a disabled one beside an enabled one, is fine
	if got, err := Select(qs, "c"); err != nil || len(got) != 1 {
		t.Errorf("Select(c): %v %v", got, err)
	}
}

// Every input has a size limit with a clear error (docs/design.md, "Input limits").
func TestInputLimits(t *testing.T) {
	if _, err := Load("", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: larger than 4 MiB, the limit for a UCI config file") {
		t.Errorf("/dev/zero: %v", err)
	}
	q := Queue{Section: "wan", Interface: "eth0", Download: 1000, Backend: Cake, LinkLayer: LinkNone, EQdiscOpts: strings.Repeat("ecn ", 2000)}
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "sqm.wan.eqdisc_opts: 8000 bytes; an option string holds at most 4096") {
		t.Errorf("long eqdisc_opts: %v", err)
	}
}

// A file as the uci CLI (and LuCI, through the same libuci) writes it: an
// anonymous section moved first, a renamed one, sqmkit's own script names.
func TestLoadUCICLIFile(t *testing.T) {
	qs, err := Load("", "../uci/testdata/uci-cli/sqm-luci.uci")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range qs {
		got = append(got, fmt.Sprintf("%s %s %v %s", q.Section, q.Interface, q.Enabled, q.Backend))
	}
	want := []string{"cfg01b68a lte0 false fq_codel", "cable eth1 true cake", "cfg03b68a pppoe-wan true nss"}
	if !slices.Equal(got, want) {
		t.Errorf("queues %q, want %q", got, want)
	}
	if sel, err := Select(qs, "@queue[2]"); err != nil || sel[0].IQdiscOpts != "interval 50ms quantum 304" {
		t.Errorf("@queue[2]: %+v %v", sel, err)
	}
}

// TestRateWarnings: a rate under 1 Mbit/s or over 10 Gbit/s is named with
// its unit spelled out; plausible rates and 0 say nothing.
func TestRateWarnings(t *testing.T) {
	for _, c := range []struct {
		down, up int
		want     []string
	}{
		{95000, 9500, nil},
		{0, 1000, nil},
		{10_000_000, 0, nil},
		{95, 9500, []string{"download 95 kbit/s is under 1 Mbit/s", "95 Mbit/s would be 95000"}},
		{95000, 950, []string{"upload 950 kbit/s is under 1 Mbit/s"}},
		{25_000_000, 9500, []string{"download 25000000 kbit/s is over 10 Gbit/s", "this is 25 Gbit/s"}},
	} {
		q := Queue{Download: c.down, Upload: c.up}
		got := strings.Join(q.RateWarnings(), "\n")
		if len(c.want) == 0 && got != "" {
			t.Errorf("%d/%d: warned %q", c.down, c.up, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%d/%d: %q lacks %q", c.down, c.up, got, w)
			}
		}
	}
}
