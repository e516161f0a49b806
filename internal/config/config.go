// Package config turns the OpenWrt SQM configuration (/etc/config/sqm, as
// LuCI writes it) and command-line flags into typed, validated Queue values.
// Option names follow sqm-scripts so a user can map every field to the LuCI
// page they already know.
package config

// Backend names the qdisc tree sqmkit builds for one queue.
type Backend string

const (
	// NSS is the Qualcomm NSS offloaded tree: nsstbl → nssfq_codel.
	NSS Backend = "nss"
	// Cake is a single cake qdisc per direction.
	Cake Backend = "cake"
	// FQCodel is an htb shaper with one fq_codel leaf per direction.
	FQCodel Backend = "fq_codel"
)

// LinkLayer is the framing the bottleneck link adds, as LuCI's "linklayer".
type LinkLayer string

const (
	LinkNone     LinkLayer = "none"
	LinkEthernet LinkLayer = "ethernet"
	LinkATM      LinkLayer = "atm"
)

// Queue is one `config queue` section of /etc/config/sqm after parsing and
// flag overrides. Rates are kbit/s; 0 means "do not shape that direction".
// Zero values of optional numbers mean "not set: compute it".
type Queue struct {
	Section   string // UCI section name ("eth1", or "cfg0a1b2c" for anonymous sections)
	Enabled   bool
	Interface string // Linux device to shape, e.g. "pppoe-wan", "eth0", "wan"

	Download int // kbit/s, shaped on the IFB (ingress)
	Upload   int // kbit/s, shaped on the WAN device (egress)

	Backend Backend
	Script  string // sqm-scripts "script" as configured, e.g. "piece_of_cake.qos"
	Qdisc   string // sqm-scripts "qdisc" as configured, e.g. "cake", "fq_codel"

	LinkLayer           LinkLayer
	Overhead            int // bytes per packet; 0 means auto-detect
	LinkLayerAdvanced   bool
	TcMTU               int
	TcTSIZE             int
	TcMPU               int    // minimum packet unit for overhead accounting
	LinkLayerAdaptation string // "default", "cake", "htb_private", "tc_stab"

	QdiscAdvanced             bool
	SquashDSCP                bool
	SquashIngress             bool
	IngressECN                bool // "ECN" / "NOECN"; default on
	EgressECN                 bool // default off
	QdiscReallyReallyAdvanced bool
	ITarget, ETarget          string // e.g. "5ms", "auto", "" (default)
	ILimit, ELimit            int    // packets; 0 means computed
	IQdiscOpts, EQdiscOpts    string // raw option strings that override computed keys
	DebugLogging              bool
	Verbosity                 int

	// sqmkit additions (flags or UCI options of the same name).
	Diffserv string // cake: diffserv3, diffserv4, diffserv8, besteffort, precedence
	RTT      string // cake RTT preset (internet, regional, metro, lan, ...) or a duration
	IFB      string // explicit IFB device name; "" derives it from Interface
	// UseMQ asks for multi-queue cake (cake_mq) where the device has
	// several queues (sqm-scripts' option use_mq).
	UseMQ bool

	// sqmkit autorate (UCI options autorate, autorate_min_download, ...):
	// download/upload above are its base rates. 0 bounds take defaults
	// (AutorateBounds).
	Autorate                 bool
	AutorateMin, AutorateMax Rates
	AutorateServer           string // HOST[:PORT] of a sqmkit serve; "" uses reflectors
	// TestServer is what test and tune measure against when given no
	// server: a sqmkit serve's HOST[:PORT] or a responsiveness server's
	// config URL; "" is the public default.
	TestServer string
	// WatchOff: no watch for the queue (option watch '0'; by default it
	// runs while autorate is off: it is free); WatchTest its scheduled
	// check ("daily", "weekly", "" none).
	WatchOff           bool
	WatchTest          string
	AutorateReflectors string // space-separated addresses; "" the defaults

	// Notes record how Load and Overrides derived values (backend choice,
	// flag overrides), one line each, for `sqmkit plan`.
	Notes []string

	// Err is what is wrong with this section's options (Load): the section
	// is refused alone, the others are not (Resolve, BadSections).
	Err error

	origin map[string]string // option -> where it was last set, see Origin
}

// Origin says where option opt was last set: "FILE:LINE" in the SQM file,
// "--flag" on the command line. An option that kept its default is placed
// at its section's `config queue` line, where it belongs; "" without a
// file. Errors about an option start with it, so the user knows which line
// or flag to fix.
func (q Queue) Origin(opt string) string {
	if o, ok := q.origin[opt]; ok {
		return o
	}
	return q.origin[sectionOrigin]
}

// sectionOrigin keys the origin of the section itself.
const sectionOrigin = ""

func (q *Queue) setOrigin(opt, where string) {
	if q.origin == nil {
		q.origin = map[string]string{}
	}
	q.origin[opt] = where
}
