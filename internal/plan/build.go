package plan

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// The numbers of docs/design.md ("Queue limit", "Burst and HTB quantum",
// "fq_codel and nssfq_codel parameters").
const (
	defaultMTU = 1500

	limitWindowMS = 30  // queue limit covers 30 ms at line rate
	minLimit      = 200 // CoDel needs packets to measure

	burstUS    = 1000 // shaper burst: 1000 µs at line rate
	atmCell    = 53
	atmPayload = 48

	// htbQuantumMax keeps the HTB class quantum near where the kernel
	// caps it; 200000 (an EdgeOS default) makes the kernel warn.
	htbQuantumMax = 60000

	fastKbit     = 100_000 // from here the fq_codel quantum is one MTU
	defaultFlows = 1024
	defaultMPU   = 64 // smallest Ethernet frame including FCS

	// slowTargetUS is the time, in µs at 1 kbit/s, to send one
	// worst-case packet of 33 ATM cells: target_us = slowTargetUS/rate.
	slowTargetUS = 1000 * 1000 * 33 * 53 * 8 / 1000
)

const (
	defaultTarget   = 5 * time.Millisecond
	defaultInterval = 100 * time.Millisecond
	slowIntervalAdd = 95 * time.Millisecond // interval = 95 ms + raised target
	defaultCakeRTT  = 100 * time.Millisecond
)

// link holds what both directions share.
type link struct {
	overhead int
	mtu      int // effective MTU
	mpu      int
	atm      bool
}

// side is the configuration of one direction.
type side struct {
	dir          config.Direction
	rate         int
	dev          string // where the shaper sits: WAN or IFB
	rateField    string
	ecn          bool
	ecnField     string
	target       string
	targetField  string
	limit        int
	limitField   string
	opts, optsFd string
	// queues is how many queues of the device the shaper spreads over:
	// above 1 only for cake_mq (mqQueues).
	queues int
}

// Build computes the plan for q on the device described by f. It is pure:
// no files, no commands, no clock. A bad option is a *config.FieldError
// that names the option, the file line or flag that set it, and the fix.
func Build(q config.Queue, f linkinfo.Facts) (*Plan, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := checkFacts(q, f); err != nil {
		return nil, err
	}
	return build(q, f)
}

func build(q config.Queue, f linkinfo.Facts) (*Plan, error) {
	p := &Plan{Section: q.Section, Backend: q.Backend, Device: q.Interface}
	p.note("section %s: interface %s, backend %s", cmp.Or(q.Section, "-"), q.Interface, q.Backend)
	p.Notes = append(p.Notes, q.Notes...) // how config chose the backend and applied flags
	for _, w := range q.RateWarnings() {
		p.note("warning: %s", w)
	}

	oh, ohNote := overhead(q, f)
	devMTU := f.MTU
	mtuFrom := "device MTU"
	if devMTU <= 0 {
		devMTU, mtuFrom = defaultMTU, "assumed device MTU"
	}
	l := link{overhead: oh, mtu: devMTU + oh, atm: q.LinkLayer == config.LinkATM}
	if q.Backend != config.NSS {
		l.mpu = defaultMPU
		if q.TcMPU > 0 {
			l.mpu = q.TcMPU
		}
	}
	p.Notes = append(p.Notes, f.Notes...)
	p.note("%s", ohNote)
	p.note("effective MTU %d = %s %d + overhead %d", l.mtu, mtuFrom, devMTU, oh)
	p.note("%s", linkLayerNote(q, l))

	up := side{dir: config.Upload, rate: q.Upload, dev: q.Interface, rateField: "upload",
		ecn: q.EgressECN, ecnField: "egress_ecn", target: q.ETarget, targetField: "etarget",
		limit: q.ELimit, limitField: "elimit", opts: q.EQdiscOpts, optsFd: "eqdisc_opts"}
	down := side{dir: config.Download, rate: q.Download, rateField: "download",
		ecn: q.IngressECN, ecnField: "ingress_ecn", target: q.ITarget, targetField: "itarget",
		limit: q.ILimit, limitField: "ilimit", opts: q.IQdiscOpts, optsFd: "iqdisc_opts"}

	if q.Upload > 0 {
		p.note("upload %d kbit/s: shaped on %s egress", q.Upload, q.Interface)
	} else {
		p.note("upload 0: egress not shaped")
	}
	ifb := IFBOf(q)
	if q.Download > 0 {
		p.IFB, down.dev = ifb, ifb
		if q.IFB != "" {
			p.note("download %d kbit/s: redirected to IFB %s (configured)", q.Download, p.IFB)
		} else {
			p.note("download %d kbit/s: redirected to IFB %s (%s)", q.Download, p.IFB, ifbRule(q.Interface, q.Backend, p.IFB))
		}
	} else {
		p.note("download 0: ingress not shaped, no IFB")
	}

	up.queues = mqQueues(p, q, config.Upload, f.TXQueues, "TX")
	down.queues = mqQueues(p, q, config.Download, f.RXQueues, "RX")
	for _, s := range []side{up, down} {
		if s.rate == 0 {
			p.Clear = append(p.Clear, teardown(s.dir, q.Interface, ifb)...)
			continue
		}
		d, err := buildDir(q, l, s, p.IFB)
		if err != nil {
			return nil, err
		}
		p.Dirs = append(p.Dirs, d)
	}
	return p, nil
}

// mqQueues is how many queues direction dir's cake_mq spreads over, 1 for
// plain cake: the WAN's TX queues on egress; on ingress the IFB gets one
// queue per RX queue of the WAN, since a redirected packet keeps the RX
// queue it arrived on as its IFB queue, so more would stay idle. A single
// queue takes plain cake, as cake_mq refuses it (TestPlanCakeMQ).
func mqQueues(p *Plan, q config.Queue, dir config.Direction, n int, kind string) int {
	if !q.UseMQ || (dir == config.Upload && q.Upload == 0) || (dir == config.Download && q.Download == 0) {
		return 1
	}
	if q.Backend != config.Cake {
		if dir == config.Upload {
			p.note("use_mq: only cake has a multi-queue variant (cake_mq); backend %s shapes on one queue", q.Backend)
		}
		return 1
	}
	have := fmt.Sprintf("%s has %d %s queues", q.Interface, n, kind)
	switch {
	case n == 0:
		have = fmt.Sprintf("the %s queues of %s are unknown here (no /sys/class/net/%s/queues)", kind, q.Interface, q.Interface)
	case n == 1:
		have = fmt.Sprintf("%s has one %s queue", q.Interface, kind)
	}
	if dir == config.Download {
		have += "; a redirected packet's RX queue is its IFB queue"
	}
	if n < 2 {
		p.note("use_mq: %s: %s, so plain cake (cake_mq needs two or more)", dir.Side(), have)
		return 1
	}
	p.note("use_mq: %s: cake_mq over %d queues (%s)", dir.Side(), n, have)
	return n
}

func (p *Plan) note(format string, a ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, a...)) }
func (d *Dir) note(format string, a ...any)  { d.Notes = append(d.Notes, fmt.Sprintf(format, a...)) }

func ifbRule(iface string, b config.Backend, name string) string {
	prefix := "ifb4<iface>"
	if b == config.NSS {
		prefix = "ifb@<iface>"
	}
	if name[4:] == iface {
		return prefix
	}
	return prefix + " shortened to 15 bytes: prefix + 7 bytes of the name + 4 hex of its FNV-1a hash"
}

func linkLayerNote(q config.Queue, l link) string {
	var s string
	switch q.Backend {
	case config.NSS:
		s = "nss: no stab on NSS, the overhead only enlarges the nsstbl mtu"
	case config.Cake:
		s = fmt.Sprintf("cake compensates overhead %d mpu %d %s", l.overhead, l.mpu, cakeATM(l))
	default:
		s = fmt.Sprintf("htb stab overhead %d mpu %d linklayer %s", l.overhead, l.mpu, stabLinkLayer(l))
	}
	if q.LinkLayer == config.LinkNone || q.LinkLayer == "" {
		s += "; linklayer none: overhead still compensated, ethernet framing"
	}
	return s
}

// checkFacts refuses what the device makes impossible; the configuration
// itself was validated by config.Queue.Validate.
func checkFacts(q config.Queue, f linkinfo.Facts) error {
	if q.Backend == config.NSS && (f.Kind == "wireguard" || f.Proto == "wireguard") {
		return q.Bad("interface", q.Interface, "%s is a wireguard interface, which NSS cannot shape; use backend cake or fq_codel", q.Interface)
	}
	if f.MTU != 0 && (f.MTU < linkinfo.MinMTU || f.MTU > linkinfo.MaxMTU) {
		return fmt.Errorf("mtu: device %s reports MTU %d, outside %d..%d; fix the device MTU", q.Interface, f.MTU, linkinfo.MinMTU, linkinfo.MaxMTU)
	}
	return nil
}

func buildDir(q config.Queue, l link, s side, ifb string) (*Dir, error) {
	d := &Dir{Direction: s.dir, Device: s.dev, RateKbit: s.rate, Overhead: l.overhead, MTU: l.mtu, MPU: l.mpu, Queues: s.queues}
	d.note("%s on %s: %d kbit/s (%s)", s.dir.Side(), s.dev, s.rate, s.rateField)
	var err error
	switch q.Backend {
	case config.NSS:
		err = nssTree(d, q, l, s)
	case config.Cake:
		err = cakeTree(d, q, l, s)
	default:
		err = htbTree(d, q, l, s)
	}
	if err != nil {
		return nil, err
	}
	wan := q.Interface
	d.Teardown = teardown(s.dir, wan, ifb)
	if s.dir == config.Upload {
		return d, nil
	}
	add := []string{"link", "add", "name", ifb, "type", "ifb"}
	if s.queues > 1 {
		add = []string{"link", "add", "name", ifb, "numtxqueues", strconv.Itoa(s.queues), "type", "ifb"}
	}
	// the alias marks the IFB as sqmkit's: only a device with it is ever
	// deleted, whatever a record says (apply's ownsIFB)
	d.Setup = [][]string{add, {"link", "set", "dev", ifb, "alias", IFBAlias, "up"}}
	// The redirect comes last: the IFB is shaped before traffic arrives.
	action := []string{"action", "mirred", "egress", "redirect", "dev", ifb}
	if q.Backend == config.NSS {
		action = []string{"action", "nssmirred", "redirect", "dev", ifb, "fromdev", wan}
	}
	d.TC = append(d.TC,
		[]string{"qdisc", "add", "dev", wan, "handle", "ffff:", "ingress"},
		append([]string{"filter", "add", "dev", wan, "parent", "ffff:", "protocol", "all", "prio", "10",
			"u32", "match", "u32", "0", "0"}, action...))
	d.Tree = append(d.Tree,
		Node{Dev: wan, Type: "qdisc", Kind: "ingress", Handle: "ffff:", Parent: tcstats.Ingress},
		Node{Dev: wan, Type: "filter", Kind: "u32", Parent: tcstats.Ingress, Redirect: ifb})
	d.Redirect = d.TC[len(d.TC)-2:]
	return d, nil
}

// Teardown removes every tree a start of a queue on wan can leave, in the
// one safe order: the redirect first, so no packet is ever sent to an IFB
// without its shaper, then the IFB's root, then wan's root. Start runs the
// per-direction parts (Dir.Teardown, Plan.Clear); stop runs it whole.
func Teardown(wan, ifb string) [][]string {
	return append(teardown(config.Download, wan, ifb), teardown(config.Upload, wan, ifb)...)
}

// IFBAlias is the alias (ifalias) sqmkit gives the IFBs it creates.
const IFBAlias = "sqmkit"

// RemoveIFB is the ip batch that deletes an IFB a stop no longer needs.
func RemoveIFB(ifb string) [][]string { return [][]string{{"link", "del", "dev", ifb}} }

// IFBOf is the IFB a queue's download uses: the ifb option, else IFBName.
func IFBOf(q config.Queue) string {
	if q.IFB != "" {
		return q.IFB
	}
	return IFBName(q.Interface, q.Backend)
}

// teardown removes direction dir's tree from wan (and its IFB); each line
// may fail harmlessly when nothing is there.
func teardown(dir config.Direction, wan, ifb string) [][]string {
	if dir == config.Upload {
		return [][]string{{"qdisc", "del", "dev", wan, "root"}}
	}
	// The redirect goes first so no packet is sent to an IFB without a qdisc.
	return [][]string{
		{"qdisc", "del", "dev", wan, "ingress"},
		{"qdisc", "del", "dev", ifb, "root"},
	}
}

// shaperBurst is the bytes sent at line rate in burstUS, never less than
// one worst-case ATM-expanded packet; it also returns the raw time-based
// value and the floor for the note.
func shaperBurst(rate, mtu int) (burst, raw, floor int) {
	raw = rate * burstUS / 8000
	floor = (mtu + atmPayload + atmPayload - 1) / atmPayload * atmCell
	return max(raw, floor), raw, floor
}

func nssTree(d *Dir, q config.Queue, l link, s side) error {
	b, raw, floor := shaperBurst(s.rate, l.mtu)
	packets := (b + l.mtu - 1) / l.mtu
	d.Burst = packets * l.mtu
	d.note("burst %d bytes: %s, rounded up to %d x effective MTU %d for nsstbl", d.Burst, burstWhy(s.rate, raw, floor, l.mtu), packets, l.mtu)
	leaf, err := codelLeaf(d, q, l, s, true)
	if err != nil {
		return err
	}
	d.TC = [][]string{
		{"qdisc", "add", "dev", s.dev, "root", "handle", "1:", "nsstbl",
			"rate", kbit(s.rate), "burst", strconv.Itoa(d.Burst), "mtu", strconv.Itoa(l.mtu), "accel_mode", "0"},
		append([]string{"qdisc", "add", "dev", s.dev, "parent", "1:", "handle", "10:", "nssfq_codel"}, leaf...),
	}
	d.Tree = []Node{
		{Dev: s.dev, Type: "qdisc", Kind: "nsstbl", Handle: "1:", Parent: "root"},
		{Dev: s.dev, Type: "qdisc", Kind: "nssfq_codel", Handle: "10:", Parent: "1:"},
	}
	return nil
}

func htbTree(d *Dir, q config.Queue, l link, s side) error {
	b, raw, floor := shaperBurst(s.rate, l.mtu)
	d.Burst = b
	d.note("burst/cburst %d bytes: %s", b, burstWhy(s.rate, raw, floor, l.mtu))
	d.Quantum = min(max(raw, l.mtu), htbQuantumMax)
	d.note("htb quantum %d bytes: %d us at line rate = %d B, at least one effective MTU %d, at most %d", d.Quantum, burstUS, raw, l.mtu, htbQuantumMax)
	leaf, err := codelLeaf(d, q, l, s, false)
	if err != nil {
		return err
	}
	stab := []string{"stab"}
	if q.TcMTU > 0 {
		stab = append(stab, "mtu", strconv.Itoa(q.TcMTU))
	}
	if q.TcTSIZE > 0 {
		stab = append(stab, "tsize", strconv.Itoa(q.TcTSIZE))
	}
	stab = append(stab, "overhead", strconv.Itoa(l.overhead), "linklayer", stabLinkLayer(l), "mpu", strconv.Itoa(l.mpu))
	rate := kbit(s.rate)
	root := append([]string{"qdisc", "add", "dev", s.dev, "root", "handle", "1:"}, stab...)
	d.TC = [][]string{
		append(root, "htb", "default", "1"),
		{"class", "add", "dev", s.dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate,
			"burst", strconv.Itoa(b), "cburst", strconv.Itoa(b), "quantum", strconv.Itoa(d.Quantum)},
		append([]string{"qdisc", "add", "dev", s.dev, "parent", "1:1", "handle", "10:", "fq_codel"}, leaf...),
	}
	d.Tree = []Node{
		{Dev: s.dev, Type: "qdisc", Kind: "htb", Handle: "1:", Parent: "root"},
		{Dev: s.dev, Type: "class", Kind: "htb", Handle: "1:1", Parent: "root"},
		{Dev: s.dev, Type: "qdisc", Kind: "fq_codel", Handle: "10:", Parent: "1:1"},
	}
	return nil
}

func burstWhy(rate, raw, floor, mtu int) string {
	s := fmt.Sprintf("%d us at %d kbit/s = %d B", burstUS, rate, raw)
	if raw < floor {
		s += fmt.Sprintf(", raised to one worst-case ATM packet ceil((%d+48)/48)*53 = %d B", mtu, floor)
	}
	return s
}

func stabLinkLayer(l link) string {
	if l.atm {
		return "atm"
	}
	return "ethernet"
}

func kbit(rate int) string { return strconv.Itoa(rate) + "kbit" }

// codelLeaf computes the fq_codel (nss: nssfq_codel) arguments for s,
// applies the user's option string and records the final values in d.
func codelLeaf(d *Dir, q config.Queue, l link, s side, nss bool) ([]string, error) {
	limit := s.limit
	limitWhy := "(" + s.limitField + ")"
	if limit == 0 {
		limit, limitWhy = queueLimit(s.rate, l.mtu)
	}
	target, interval, targetWhy, intervalWhy, err := codelTimes(q, s)
	if err != nil {
		return nil, err
	}
	quantum := l.mtu
	quantumWhy := fmt.Sprintf("effective MTU at >= %d kbit/s", fastKbit)
	if s.rate < fastKbit {
		quantum = l.mtu/5 + 1
		quantumWhy = fmt.Sprintf("%d/5+1 below %d kbit/s: small packets get a head start", l.mtu, fastKbit)
	}
	g, args := codelArgs(s, nss, limit, quantum, target, interval)
	user, err := parseOpts(s.opts, g)
	if err != nil {
		return nil, q.Bad(s.optsFd, s.opts, "%v", err)
	}
	final := override(args, user)
	from := func(key, why string) string {
		if _, ok := lookup(user, key); ok {
			return s.optsFd
		}
		return why
	}
	if err := d.takeCodel(q, s, final, from); err != nil {
		return nil, err
	}
	d.note("limit %d packets: %s", d.Limit, from("limit", limitWhy))
	d.note("target %s: %s", tcTime(d.Target), from("target", targetWhy))
	d.note("interval %s: %s", tcTime(d.Interval), from("interval", intervalWhy))
	d.note("quantum %d bytes: %s", d.FQQuantum, from("quantum", quantumWhy))
	d.note("flows %d", d.Flows)
	d.note("%s", ecnNote(d.ECN, s, user, nss))
	return words(final), nil
}

// codelTimes are s's target and interval and why: the defaults, a target
// that fits one worst-case ATM packet on a slow link, or the configured one.
func codelTimes(q config.Queue, s side) (target, interval time.Duration, targetWhy, intervalWhy string, err error) {
	target, interval = defaultTarget, defaultInterval
	targetWhy, intervalWhy = "default", "default"
	switch s.target {
	case "", "auto":
		if us := slowTargetUS / s.rate; us > int(defaultTarget/time.Microsecond) {
			target = time.Duration(us) * time.Microsecond
			interval = slowIntervalAdd + target
			targetWhy = fmt.Sprintf("%d us / %d kbit/s: one worst-case 33-cell ATM packet fits on this slow link", slowTargetUS, s.rate)
			intervalWhy = "95ms + target"
		}
	default:
		t, err := tcstats.ParseTime(s.target) // config.Validate accepted it
		if err != nil {
			return 0, 0, "", "", q.Bad(s.targetField, s.target, "%v; or use auto", err)
		}
		target, targetWhy = t, s.targetField
	}
	return target, interval, targetWhy, intervalWhy, nil
}

// codelArgs are the computed arguments in the order tc prints them, and the
// grammar the user's option string is parsed with.
func codelArgs(s side, nss bool, limit, quantum int, target, interval time.Duration) (grammar, []arg) {
	g := fqCodelGrammar
	args := []arg{
		{key: "limit", val: strconv.Itoa(limit), group: "limit"},
		{key: "target", val: tcTime(target), group: "target"},
		{key: "interval", val: tcTime(interval), group: "interval"},
		{key: "quantum", val: strconv.Itoa(quantum), group: "quantum"},
		{key: "flows", val: strconv.Itoa(defaultFlows), group: "flows"},
	}
	switch {
	case nss:
		g = nssFQCodelGrammar
		args[3], args[4] = args[4], args[3] // the order the NSS tc prints
		if s.ecn {
			args = append(args, arg{key: "ecn", group: "ecn"})
		}
		args = append(args, arg{key: "set_default", group: "set_default", tail: true},
			arg{key: "accel_mode", val: "0", group: "accel_mode", tail: true})
	case s.ecn:
		args = append(args, arg{key: "ecn", group: "ecn"})
	default:
		args = append(args, arg{key: "noecn", group: "ecn"})
	}
	return g, args
}

// takeCodel records the final arguments in d, refusing what fq_codel
// would: a bad value is the user's when their option string set it; a
// computed one can only come from a device fact, which checkFacts bounds.
func (d *Dir) takeCodel(q config.Queue, s side, final []arg, from func(key, why string) string) error {
	blame := func(key string, err error) error {
		if from(key, "") == s.optsFd {
			return q.Bad(s.optsFd, s.opts, "%s %v", key, err)
		}
		return fmt.Errorf("computed %s: %v", key, err)
	}
	var err error
	for _, v := range []struct {
		key string
		to  *int
	}{{"limit", &d.Limit}, {"quantum", &d.FQQuantum}, {"flows", &d.Flows}} {
		if *v.to, err = intOpt(final, v.key); err != nil {
			return blame(v.key, err)
		}
	}
	for _, v := range []struct {
		key string
		to  *time.Duration
	}{{"target", &d.Target}, {"interval", &d.Interval}} {
		if *v.to, err = timeOpt(final, v.key); err != nil {
			return blame(v.key, err)
		}
	}
	if d.Target >= d.Interval {
		field, value := s.optsFd, s.opts
		if from("target", "") != s.optsFd && s.target != "" {
			field, value = s.targetField, s.target
		}
		return q.Bad(field, value, "target %s is not below interval %s; lower the target or raise the interval", tcTime(d.Target), tcTime(d.Interval))
	}
	if v, ok := lookup(final, "accel_mode"); ok && v != "0" {
		return q.Bad(s.optsFd, s.opts, "accel_mode %s; nss needs accel_mode 0 so the whole tree is offloaded, remove it", v)
	}
	d.ECN = has(final, "ecn")
	return nil
}

// queueLimit is the packets that fill limitWindowMS at rate, at least
// minLimit, and the rule that produced it.
func queueLimit(rate, mtu int) (int, string) {
	n := rate * 125 * limitWindowMS / 1000 / mtu
	rule := fmt.Sprintf("%d kbit/s x %d ms / %d B = %d", rate, limitWindowMS, mtu, n)
	if n < minLimit {
		return minLimit, rule + fmt.Sprintf(", raised to the floor %d", minLimit)
	}
	return n, rule + fmt.Sprintf(" (%d ms window, floor %d)", limitWindowMS, minLimit)
}

func ecnNote(on bool, s side, user []arg, nss bool) string {
	why := s.ecnField
	if has(user, "ecn") || has(user, "noecn") {
		why = s.optsFd
	}
	switch {
	case on && nss:
		return fmt.Sprintf("ECN on (%s); NSS firmware accepts ecn but drops instead of marking", why)
	case on:
		return fmt.Sprintf("ECN on (%s)", why)
	}
	return fmt.Sprintf("ECN off (%s)", why)
}

func intOpt(args []arg, key string) (int, error) {
	v, _ := lookup(args, key)
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > maxOptInt {
		return 0, fmt.Errorf("%q is not a whole number in 1..%d", v, maxOptInt)
	}
	return n, nil
}

// maxOptInt bounds limits, quanta and flow counts: the kernel keeps them in
// 32 bits, and no sane queue comes near.
const maxOptInt = 1 << 30

func timeOpt(args []arg, key string) (time.Duration, error) {
	v, _ := lookup(args, key)
	t, err := tcstats.ParseTime(v)
	if err != nil {
		return 0, err
	}
	if t <= 0 {
		return 0, fmt.Errorf("%q must be above 0", v)
	}
	return t, nil
}
