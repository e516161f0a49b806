// Package profile reads the lab's link profiles: small key = value files
// that describe the emulated access link (rates, base RTT, bottleneck buffer,
// per-packet framing and the WAN encapsulation the router sees).
package profile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Encap is how the router's WAN reaches the modem.
type Encap struct {
	PPPoE bool
	VLAN  int // 802.1Q id; 0 = untagged
}

func (e Encap) String() string {
	switch {
	case e.PPPoE && e.VLAN > 0:
		return fmt.Sprintf("pppoe+vlan %d", e.VLAN)
	case e.PPPoE:
		return "pppoe"
	case e.VLAN > 0:
		return fmt.Sprintf("vlan %d", e.VLAN)
	}
	return "plain"
}

// HeaderBytes is what the encapsulation adds to every frame that a qdisc
// on the underlying Ethernet device sees in skb->len: PPPoE header 6 + PPP
// protocol 2. The 802.1Q tag is not there: the kernel carries it in skb
// metadata and writes it into the frame only after the qdisc (measured in
// the guest: a 1000-byte IP packet over PPPoE+VLAN counts 1022 bytes on
// the port, with tx VLAN offload on or off; only reorder_hdr off puts the
// tag in, and that breaks PPPoE receive on the VLAN device).
func (e Encap) HeaderBytes() int {
	if e.PPPoE {
		return 8
	}
	return 0
}

// Profile is one emulated access link. Rates are kbit/s of line rate.
type Profile struct {
	Name      string
	Down, Up  int
	RTTms     int
	BufferMs  int    // depth of the bottleneck FIFO, in ms at line rate
	Overhead  int    // wire bytes per IP packet beyond the IP packet itself
	LinkLayer string // ethernet, atm or ptm
	Encap     Encap
	// BoostMB and BoostPct model a cable modem's token-bucket "speed boost"
	// on the download: the first BoostMB megabytes after an idle spell pass
	// at BoostPct % of the line rate. 0: no boost.
	BoostMB, BoostPct int
	// ExpectBloatMs is the median added latency the unshaped link must show
	// under bidirectional load; it proves the emulation really is bloated.
	ExpectBloatMs int
	// Limitations name backends that cannot meet the shaped bar on this link
	// for a physical reason, with the reason.
	Limitations map[string]string
}

// Parse reads a profile. Unknown keys are errors so typos do not silently
// fall back to defaults.
func Parse(r io.Reader, name string) (*Profile, error) {
	p := &Profile{LinkLayer: "ethernet", Limitations: map[string]string{}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want `key = value`, got %q", name, line, s)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if seen[k] {
			return nil, fmt.Errorf("%s:%d: %s set twice", name, line, k)
		}
		seen[k] = true
		if err := p.set(k, v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, k := range []string{"name", "down", "up", "rtt_ms", "buffer_ms", "overhead"} {
		if !seen[k] {
			return nil, fmt.Errorf("%s: missing %s (see lab/README.md for the profile format)", name, k)
		}
	}
	if seen["boost_mb"] != seen["boost_pct"] {
		return nil, fmt.Errorf("%s: boost_mb and boost_pct go together (a boost needs its size and its rate)", name)
	}
	return p, nil
}

func (p *Profile) set(k, v string) error {
	if b, ok := strings.CutPrefix(k, "limitation."); ok {
		switch b {
		case "nss", "cake", "fq_codel":
		default:
			return fmt.Errorf("%s: unknown backend %q (want nss, cake or fq_codel)", k, b)
		}
		if v == "" {
			return fmt.Errorf("%s: give the reason", k)
		}
		p.Limitations[b] = v
		return nil
	}
	num := func(dst *int, min, max int) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			return fmt.Errorf("%s: want a whole number from %d to %d, got %q", k, min, max, v)
		}
		*dst = n
		return nil
	}
	switch k {
	case "name":
		if v == "" || strings.ContainsAny(v, "/ \t") {
			return fmt.Errorf("name: want a word without spaces or slashes, got %q", v)
		}
		p.Name = v
	case "down":
		return num(&p.Down, 64, 1000000)
	case "up":
		return num(&p.Up, 64, 1000000)
	case "rtt_ms":
		return num(&p.RTTms, 0, 1000)
	case "buffer_ms":
		return num(&p.BufferMs, 1, 5000)
	case "overhead":
		return num(&p.Overhead, 0, 256)
	case "expect_bloat_ms":
		return num(&p.ExpectBloatMs, 0, 5000)
	case "boost_mb":
		return num(&p.BoostMB, 0, 1000)
	case "boost_pct":
		return num(&p.BoostPct, 101, 300)
	case "linklayer":
		switch v {
		case "ethernet", "atm", "ptm":
			p.LinkLayer = v
		default:
			return fmt.Errorf("linklayer: want ethernet, atm or ptm, got %q", v)
		}
	case "encap":
		e, err := parseEncap(v)
		if err != nil {
			return err
		}
		p.Encap = e
	default:
		return fmt.Errorf("unknown key %q", k)
	}
	return nil
}

func parseEncap(v string) (Encap, error) {
	f := strings.Fields(v)
	bad := fmt.Errorf("encap: want plain, vlan N, pppoe or pppoe+vlan N, got %q", v)
	if len(f) == 1 && f[0] == "plain" {
		return Encap{}, nil
	}
	if len(f) == 1 && f[0] == "pppoe" {
		return Encap{PPPoE: true}, nil
	}
	if len(f) != 2 || (f[0] != "vlan" && f[0] != "pppoe+vlan") {
		return Encap{}, bad
	}
	id, err := strconv.Atoi(f[1])
	if err != nil || id < 1 || id > 4094 {
		return Encap{}, fmt.Errorf("encap: VLAN id must be 1..4094, got %q", f[1])
	}
	return Encap{PPPoE: f[0] == "pppoe+vlan", VLAN: id}, nil
}

// Load reads a profile by path (anything containing a slash or ending in
// .conf) or by name from dir.
func Load(dir, arg string) (*Profile, error) {
	path := arg
	if !strings.ContainsRune(arg, '/') && !strings.HasSuffix(arg, ".conf") {
		path = filepath.Join(dir, arg+".conf")
	}
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) && path != arg {
			names, _ := List(dir)
			return nil, fmt.Errorf("no profile %q (have: %s)", arg, strings.Join(names, ", "))
		}
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// List names the profiles in dir, sorted.
func List(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".conf"))
	}
	sort.Strings(names)
	return names, nil
}
