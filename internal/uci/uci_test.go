package uci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// opt is a compact expectation: "name=value" for options, "name=[a b]" for
// lists (items joined by '|'), followed by "@line".
func summary(s *Section) []string {
	var out []string
	for _, o := range s.Options {
		v := o.Values[0]
		if o.List {
			v = "[" + strings.Join(o.Values, "|") + "]"
		}
		out = append(out, o.Name+"="+v+"@"+strconv.Itoa(o.Line))
	}
	return out
}

func mustFixture(t *testing.T, name string) *File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("/etc/config/"+name, data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return f
}

type secWant struct {
	typ, name string
	anon      bool
	line      int
	opts      []string // nil: not checked
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file string
		pkg  string
		want []secWant
	}{
		{"sqm-luci", "", []secWant{
			{"queue", "eth1", false, 2, []string{
				"enabled=1@3", "interface=wan@4", "download=285000@5", "upload=142500@6",
				"qdisc=fq_codel@7", "script=nss-zk.qos@8", "linklayer=none@9", "debug_logging=0@10",
				"verbosity=5@11", "qdisc_advanced=1@12", "squash_dscp=1@13", "squash_ingress=1@14",
				"ingress_ecn=ECN@15", "egress_ecn=NOECN@16", "qdisc_really_really_advanced=1@17",
				"itarget=4ms@18", "etarget=4ms@19",
				"iqdisc_opts=interval 50ms quantum 304@20", "eqdisc_opts=interval 50ms quantum 304@21"}},
			// djb hash of "queue" is 0x...b68a; second section in the file.
			{"queue", "cfg02b68a", true, 23, nil},
		}},
		{"network-pppoe-vlan", "", []secWant{
			{"interface", "loopback", false, 2, nil},
			{"globals", "globals", false, 8, nil},
			// libuci shows this section as network.cfg030f15.
			{"device", "cfg030f15", true, 12, []string{"name=br-lan@13", "type=bridge@14", "ports=[lan1|lan2|lan3|lan4]@18"}},
			{"interface", "lan", false, 20, nil},
			{"interface", "wan", false, 27, []string{"device=wan.7@28", "proto=pppoe@29",
				"username=anonymous@t-online.de@30", `password=p@ss'w"rd@31`, "ipv6=auto@32"}},
			{"interface", "wan6", false, 34, []string{"device=@wan@35", "proto=dhcpv6@36"}},
		}},
		{"network-ifname", "", []secWant{
			{"interface", "loopback", false, 2, nil},
			{"interface", "lan", false, 8, nil},
			{"interface", "wan", false, 15, []string{"ifname=eth0.2@16", "proto=dhcp@17"}},
			{"switch", "cfg043777", true, 19, nil},
			{"switch_vlan", "cfg051ec7", true, 24, nil},
			{"switch_vlan", "cfg061ec7", true, 29, []string{"device=switch0@30", "vlan=2@31", "ports=4 6t@32"}},
		}},
		{"sqm-crlf", "sqm", []secWant{
			{"queue", "eth1", false, 3, []string{"enabled=1@4", "interface=eth1@5", "download=95000@6"}},
		}},
		{"quirks", "test", []secWant{
			{"t", "n1", false, 4, []string{
				"a=1@4", // option a '' later leaves it, as libuci does
				"b=2@4",
				"c=it's@6",
				`d=say "hi" \ n@7`,
				"e=un quoted@8",
				"f=multi\nline@9",
				"g=abc@11",
				"h=x@12",
				"l=[one|two]@15",
				"s=[single|more]@17",
				"joined=first@18",
			}},
			{"other-type", "cfg028876", true, 20, []string{}},
			{"t", "cfg03b619", true, 21, []string{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := mustFixture(t, tt.file)
			if f.Package != tt.pkg {
				t.Errorf("package = %q, want %q", f.Package, tt.pkg)
			}
			if len(f.Sections) != len(tt.want) {
				t.Fatalf("%d sections, want %d", len(f.Sections), len(tt.want))
			}
			for i, w := range tt.want {
				s := f.Sections[i]
				if s.Type != w.typ || s.Name != w.name || s.Anonymous != w.anon || s.Line != w.line {
					t.Errorf("section %d = %s %s anon=%v line %d, want %s %s anon=%v line %d",
						i, s.Type, s.Name, s.Anonymous, s.Line, w.typ, w.name, w.anon, w.line)
				}
				if w.opts == nil {
					continue
				}
				if got := summary(s); !reflect.DeepEqual(got, w.opts) && !(len(got) == 0 && len(w.opts) == 0) {
					t.Errorf("section %s options:\n got %q\nwant %q", s.Name, got, w.opts)
				}
			}
		})
	}
}

func TestLookupAndGet(t *testing.T) {
	f := mustFixture(t, "network-pppoe-vlan")
	for sel, want := range map[string]string{
		"wan":              "wan",
		"@interface[0]":    "loopback",
		"@interface[-1]":   "wan6",
		"@device[0]":       "cfg030f15",
		"@[1]":             "globals",
		"cfg030f15":        "cfg030f15",
		"@interface[9]":    "",
		"@interface[x]":    "",
		"nosuch":           "",
		"@interface[0":     "",
		"@interface[-100]": "",
	} {
		s := f.Lookup(sel)
		got := ""
		if s != nil {
			got = s.Name
		}
		if got != want {
			t.Errorf("Lookup(%q) = %q, want %q", sel, got, want)
		}
	}
	dev := f.Lookup("@device[0]")
	if v, ok := dev.Get("ports"); !ok || v != "lan1 lan2 lan3 lan4" {
		t.Errorf("Get(ports) = %q, %v", v, ok)
	}
	if _, ok := dev.Get("nosuch"); ok {
		t.Error("Get(nosuch) reported set")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in   string
		line int
		msg  string
	}{
		{"option a 'b'\n", 1, `option "a" before any config section`},
		{"\n\nlist a 'b'\n", 3, `list "a" before any config section`},
		{"config queue\n\toption a 'b\n", 2, "unterminated ' quote"},
		{"config queue\n\toption a \"b\\\"\n", 2, `unterminated " quote`},
		{"config queue 'a-b'\n", 1, `invalid section name "a-b"`},
		{"config\n", 1, "config without a section type"},
		{"config queue\n option\n", 2, "option without a name"},
		{"config queue\n option a.b 1\n", 2, `invalid option name "a.b"`},
		{"config queue\n option a b c\n", 2, `unexpected "c" after the last argument`},
		{"config queue x y\n", 1, `unexpected "y"`},
		{"config q\n option a x\\\n y\n", 2, `unexpected "y"`},
		{"config queue\n optoin a b\n", 2, `unknown statement "optoin"`},
		{"config queue\n 'option' a b\n", 2, `unknown statement "'option'"`},
		{"config a 'x'\nconfig b 'x'\n", 2, `section "x" of type "b" repeats section of type "a" from line 1`},
		{"package a\npackage b\n", 2, `second package "b"`},
		{"package\n", 1, "package without a name"},
		{"package a.b\n", 1, `invalid package name "a.b"`},
		{"config q\n option a '\x00'\n", 2, "NUL byte"},
		{"config q\n option a x\x00\n", 2, "NUL byte"},
		{"\x00", 1, "NUL byte"},
		{"config 'a\x01'\n", 1, "invalid section type"},
	}
	for _, tt := range tests {
		_, err := Parse("/etc/config/sqm", []byte(tt.in))
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v, want *Error", tt.in, err)
			continue
		}
		if pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg) || pe.Fix == "" {
			t.Errorf("Parse(%q) = %v, want line %d containing %q with a fix", tt.in, err, tt.line, tt.msg)
		}
		if !strings.HasPrefix(err.Error(), "/etc/config/sqm:"+strconv.Itoa(tt.line)+": ") || !strings.Contains(err.Error(), "(fix: ") {
			t.Errorf("error text %q lacks FILE:LINE: prefix or fix", err)
		}
	}
}

func TestOptionSemantics(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"config q\n option a 1\n option a 2\n", []string{"a=2@3"}},
		{"config q\n option a 1\n option b 2\n option a 3\n", []string{"a=3@4", "b=2@3"}},
		{"config q\n option a 1\n option a ''\n", []string{"a=1@2"}},
		{"config q\n option a 1\n option a\n", []string{"a=1@2"}},
		{"config q\n option a ''\n", nil},
		{"config q\n list a 1\n option a ''\n", []string{"a=[1]@2"}},
		{"config q\n option a 1\n option b 2\n list a 3\n", []string{"a=[1|3]@4", "b=2@3"}},
		{"config q\n list a ''\n list a x\n", []string{"a=[|x]@3"}},
		{"config q\n list a 1\n option a 2\n", []string{"a=2@3"}},
		{"config q\n option a 'x' # comment\n", []string{"a=x@2"}},
		{"config q\n option a x;option b y\n", []string{"a=x@2", "b=y@2"}},
		{"config q\n option a 'x;y'\n", []string{"a=x;y@2"}},
		{"config q\n option a \\\n\t'x'\n", []string{"a=x@2"}},
		{"config q\n option a x\\\ny\n", []string{"a=xy@2"}},
		{"config q\n option a x\\", []string{"a=x@2"}},
		{"config q\n\toption\ta\t'\tx '\t\t\n", []string{"a=\tx @2"}},
	}
	for _, tt := range tests {
		f, err := Parse("t", []byte(tt.in))
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := summary(f.Sections[0]); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) options = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAnonymousName(t *testing.T) {
	// Names libuci shows on stock OpenWrt: firewall defaults is the first
	// section, the zones the second and third.
	for _, tt := range []struct {
		pos  int
		typ  string
		want string
	}{
		{1, "defaults", "cfg01e63d"},
		{2, "zone", "cfg02dc81"},
		{3, "zone", "cfg03dc81"},
		{3, "device", "cfg030f15"},
		{300, "queue", "cfg12cb68a"},
	} {
		if got := anonymousName(tt.pos, tt.typ); got != tt.want {
			t.Errorf("anonymousName(%d, %q) = %q, want %q", tt.pos, tt.typ, got, tt.want)
		}
	}
}

// BenchmarkParse measures a LuCI-written network file, the largest file a
// start reads; a start parses two such files.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/network-pppoe-vlan")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if _, err := Parse("network", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseScaling parses one section of n options, each set twice
// (libuci replaces a re-set option where it stands): ns/op per option must stay
// flat as n grows tenfold (it grew with n before options were indexed).
func BenchmarkParseScaling(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		var buf strings.Builder
		buf.WriteString("config queue 'q'\n")
		for i := range n {
			fmt.Fprintf(&buf, "\toption o%d 'v'\n", i)
		}
		for i := range n {
			fmt.Fprintf(&buf, "\toption o%d 'w'\n", i)
		}
		data := []byte(buf.String())
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				f, err := Parse("sqm", data)
				if err != nil || len(f.Sections[0].Options) != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/option")
		})
	}
}

// The files in testdata/uci-cli were written by OpenWrt's uci command (set,
// add, add_list, del_list, delete, rename, reorder, commit; LuCI writes
// through the same libuci), with `uci export` and `uci -X show` of each.
// Parsed here, the committed file and the export must read exactly as
// libuci read them: the .show file, rendered the same way.
func TestReadsAsLibuci(t *testing.T) {
	shows, err := filepath.Glob("testdata/uci-cli/*.show")
	if err != nil || len(shows) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, show := range shows {
		base := strings.TrimSuffix(show, ".show")
		pkg := strings.SplitN(filepath.Base(base), "-", 2)[0]
		want, err := os.ReadFile(show)
		if err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{".uci", ".export"} {
			data, err := os.ReadFile(base + ext)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(base+ext, data)
			if err != nil {
				t.Errorf("%s: %v", base+ext, err)
				continue
			}
			if ext == ".export" && f.Package != pkg {
				t.Errorf("%s: package %q, want %q", base+ext, f.Package, pkg)
			}
			if got := showX(pkg, f); got != string(want) {
				t.Errorf("%s reads differently from libuci:\n got:\n%s\nwant:\n%s", base+ext, got, want)
			}
		}
	}
}

// showX renders f as `uci -X show PKG` prints it.
func showX(pkg string, f *File) string {
	quote := func(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
	var b strings.Builder
	for _, s := range f.Sections {
		fmt.Fprintf(&b, "%s.%s=%s\n", pkg, s.Name, s.Type)
		for _, o := range s.Options {
			vals := make([]string, len(o.Values))
			for i, v := range o.Values {
				vals[i] = quote(v)
			}
			fmt.Fprintf(&b, "%s.%s.%s=%s\n", pkg, s.Name, o.Name, strings.Join(vals, " "))
		}
	}
	return b.String()
}
