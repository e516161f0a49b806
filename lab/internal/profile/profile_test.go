package profile

import (
	"strings"
	"testing"
)

const base = "name = t\ndown = 1000\nup = 500\nrtt_ms = 10\nbuffer_ms = 100\noverhead = 18\n"

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     Encap
		wantErr  string
	}{
		{"plain default", base, Encap{}, ""},
		{"vlan", base + "encap = vlan 7\n", Encap{VLAN: 7}, ""},
		{"pppoe", base + "encap = pppoe\n", Encap{PPPoE: true}, ""},
		{"pppoe vlan", base + "# c\n\nencap = pppoe+vlan 7\n", Encap{PPPoE: true, VLAN: 7}, ""},
		{"bad vlan", base + "encap = vlan 5000\n", Encap{}, "VLAN id"},
		{"bad encap", base + "encap = pppoa\n", Encap{}, "encap: want"},
		{"missing key", "name = t\n", Encap{}, "missing down"},
		{"unknown key", base + "speed = 3\n", Encap{}, `unknown key "speed"`},
		{"twice", base + "up = 3\n", Encap{}, "up set twice"},
		{"not a number", strings.Replace(base, "1000", "fast", 1), Encap{}, "down: want a whole number"},
		{"no equals", base + "oops\n", Encap{}, ":7: want `key = value`"},
		{"bad linklayer", base + "linklayer = docsis\n", Encap{}, "linklayer: want"},
		{"bad limitation", base + "limitation.hfsc = x\n", Encap{}, "unknown backend"},
		{"boost", base + "boost_mb = 20\nboost_pct = 120\n", Encap{}, ""},
		{"boost without its rate", base + "boost_mb = 20\n", Encap{}, "boost_mb and boost_pct go together"},
		{"boost below the line", base + "boost_mb = 20\nboost_pct = 90\n", Encap{}, "boost_pct: want a whole number from 101"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tt.in), "f")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Encap != tt.want || p.Down != 1000 || p.Up != 500 || p.LinkLayer != "ethernet" {
				t.Errorf("got %+v", p)
			}
		})
	}
}

func TestEncapHeaderBytes(t *testing.T) {
	for _, tt := range []struct {
		e    Encap
		want int
		s    string
	}{
		{Encap{}, 0, "plain"},
		{Encap{VLAN: 7}, 0, "vlan 7"},
		{Encap{PPPoE: true}, 8, "pppoe"},
		{Encap{PPPoE: true, VLAN: 7}, 8, "pppoe+vlan 7"},
	} {
		if got := tt.e.HeaderBytes(); got != tt.want {
			t.Errorf("%v: HeaderBytes = %d, want %d", tt.e, got, tt.want)
		}
		if got := tt.e.String(); got != tt.s {
			t.Errorf("String = %q, want %q", got, tt.s)
		}
		if e, err := parseEncap(tt.s); err != nil || e != tt.e {
			t.Errorf("parseEncap(%q) = %v, %v", tt.s, e, err)
		}
	}
}

func TestShippedProfiles(t *testing.T) {
	names, err := List("../../profiles")
	if err != nil || len(names) < 4 {
		t.Fatalf("List = %v, %v; want the four shipped profiles", names, err)
	}
	for _, n := range names {
		p, err := Load("../../profiles", n)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != n {
			t.Errorf("%s: name = %q, want the file name", n, p.Name)
		}
	}
	if _, err := Load("../../profiles", "dialup"); err == nil || !strings.Contains(err.Error(), "cable") {
		t.Errorf("unknown profile: err = %v, want it to list the shipped ones", err)
	}
}
