package main

import (
	"os"
	"path/filepath"
	"slices"
)

// ciPlan is what `make test` runs in the lab: cake on cable beside the
// unshaped line, nss on the worked example's VDSL (PPPoE over VLAN 7; nss
// on cable, fq_codel on cable and VDSL unshaped only repeated a proof the
// plan already holds, so they are make lab's, and the kernel tests apply
// fq_codel's trees in the same guest), the hotplug scenario,
// one tune (cake on cable, the default backend on the profile most users
// have, over IPv6; make lab's tunes run over IPv4), ~5 minutes of CI (a
// sweep beside it would add 3 more per direction searched, so make test
// holds tune to the floor of againstLine and make lab's tunes, each beside
// a sweep (allPlan), hold it to the acceptance), and OpenWrt's real
// userland in the router: the router owner's journey through LuCI on
// cable (which also runs the package's cake script the way sqm-scripts
// does, so the qos: backends are make lab's) and netifd's PPPoE session
// dropping and returning on VDSL; and the watch naming a faster line and
// keeping its finding across a reboot (its quickest variant, two minutes;
// steady and falls are make lab's).
var ciPlan = []planRun{
	{Profile: "cable", Backends: []string{unshaped, "cake"}},
	{Profile: "vdsl-pppoe-vlan7", Backends: []string{"nss"}},
	{Profile: "vdsl-pppoe-vlan7", Backends: []string{"cake"}, Mode: "hotplug"},
	{Profile: "cable", Backends: []string{"cake"}, Mode: "tune", IPv6: true},
	{Profile: "cable", Mode: "journey"},
	{Profile: "vdsl-pppoe-vlan7", Backends: owrtWays, Mode: "openwrt-pppoe"},
	{Profile: "cable", Backends: []string{"rises"}, Mode: "watch"},
}

// allSweep is the sweep beside each of make lab's tunes: 70 %, not the
// 80 % a sweep starts from by hand, because nss on ATM counts no cells and
// its best pair sits under 80 % of adsl-atm's sync rate; with a direction
// ending after 3 passing steps, the lower end costs nothing where the
// knee is higher.
var allSweep = sweepSpec{From: 70, To: 100, Stop: 3}

// rpmProfiles are where `rpm` checks sqmkit against the reference
// responsiveness server: a slow bloated line, where the guest's CPU has room
// for the server's TLS beside the router, and cable, where it does not.
var rpmProfiles = []string{"adsl-atm", "cable"}

// rpmPlan is rpm mode on each profile, unshaped and with cake.
func rpmPlan(profiles []string) []planRun {
	var plan []planRun
	for _, p := range profiles {
		plan = append(plan, planRun{Profile: p, Backends: []string{unshaped, "cake"}, Mode: "rpm"})
	}
	return plan
}

// allPlan is make lab's matrix: every profile × every backend, the .qos
// scripts and lab/ext's shapers on cable, the hotplug scenario, the
// watch's variants on cable, the reference responsiveness server
// (rpmPlan), and tune's
// acceptance (sqmkit tune beside a sweep) on every profile × sqmkit's
// backends, each about 15-20 minutes; on cpuProfiles, tune alone.
func allPlan(profiles []string, repo string) []planRun {
	var plan []planRun
	var shaped []string // the profiles the guest can shape at line rate
	for _, n := range profiles {
		if slices.Contains(cpuProfiles, n) {
			plan = append(plan, planRun{Profile: n, Backends: []string{"cake", "fq_codel"}, Mode: "tune"})
			continue
		}
		shaped = append(shaped, n)
		plan = append(plan, planRun{Profile: n, Backends: allBackends})
	}
	cable := slices.Clone(qosBackends)
	for _, e := range extExamples {
		cable = append(cable, extPrefix+e+"="+filepath.Join(repo, "lab/ext", e))
	}
	plan = append(plan, planRun{Profile: "cable", Backends: cable},
		planRun{Profile: "vdsl-pppoe-vlan7", Backends: sqmkitBackends, Mode: "hotplug"},
		planRun{Profile: "cable", Mode: "journey"}, planRun{Profile: "vdsl-pppoe-vlan7", Backends: owrtWays, Mode: "openwrt-pppoe"},
		planRun{Profile: "cable", Backends: watchVariants, Mode: "watch"})
	plan = append(plan, rpmPlan(rpmProfiles)...)
	for _, n := range shaped {
		sw := allSweep
		plan = append(plan, planRun{Profile: n, Backends: sqmkitBackends, Mode: "tune", Sweep: &sw})
	}
	return plan
}

// cpuProfiles are lines faster than the emulated router shapes: make lab
// runs tune alone on them, judged by the CPU (cpuCeilingCheck), since a graded
// run at 95 % of their line or a sweep there measures the guest's CPU, not
// the shaper.
var cpuProfiles = []string{"fiber-fast", "vdsl-ptm-pppoe"}

// qosBackends are the OpenWrt package's .qos scripts.
var qosBackends = []string{"qos:sqmkit-nss.qos", "qos:sqmkit-cake.qos", "qos:sqmkit-fq_codel.qos"}

// extExamples are the external backends in lab/ext: "why not just a shaper
// script", in numbers, on cable in `all`.
var extExamples = []string{"wondershaper-style", "htb-fifo"}

// labPlan is what the host hands the guest (plan.json in the run dir).
type labPlan struct {
	Bin string `json:"bin"` // snapshot of bin/: other builds may replace bin/ while the guest runs
	// Stack is OpenWrt's userland (scripts/openwrt-stack.sh's root), for
	// the .qos scenarios, the PPPoE one on netifd and the journey.
	Stack string `json:"stack,omitempty"`
	// JourneyPort is the host's port QEMU forwards to the guest's
	// journeyPort, for the journey's browser.
	JourneyPort int       `json:"journey_port,omitempty"`
	Out         string    `json:"out"`
	Commit      string    `json:"commit"`
	Runs        []planRun `json:"runs"`
	// KernelTests runs bin/labtests/*.test (TestLab*) before the scenarios.
	KernelTests bool `json:"kernel_tests"`
	// Demo judges host noise as `make demo` does (demoGate).
	Demo bool `json:"demo,omitempty"`
}

type planRun struct {
	Profile  string   `json:"profile"` // path
	Backends []string `json:"backends"`
	// Mode is what the guest does with them: "" grades each backend,
	// "hotplug" runs the OpenWrt hotplug scenario (hotplug.go), "tune"
	// sqmkit tune before the grade (tune.go), "sweep" the exhaustive
	// measurement alone, "journey" the router owner's journey through
	// LuCI (journey.go; no backends), "openwrt-pppoe" the PPPoE session on
	// real netifd with each of Backends (service, sqm-scripts; owrt.go),
	// "rpm" the reference responsiveness server beside sqmkit serve (rpm.go).
	Mode string `json:"mode,omitempty"`
	// Sweep, in tune and sweep modes: the range and its early stop.
	Sweep *sweepSpec `json:"sweep,omitempty"`
	// Kept, in a second pass of tune mode (secondPass): the first pass's
	// sweep per backend, measured clean, which the tune is checked against
	// instead of sweeping again.
	Kept map[string]*swept `json:"-"`
	// AB, in ab mode: the rates, the instruments and the rounds (ab.go).
	AB *abSpec `json:"ab,omitempty"`
	// IPv6, in tune mode: sqmkit tune reaches the server over IPv6.
	IPv6 bool `json:"ipv6,omitempty"`
	// Trace, in trace mode: the capacity trace file, or a recording's
	// pair "A.down,A.up" (mahimahi's format); Backends are then the
	// controllers. Seconds, when set, replays only its first seconds;
	// SlotMs is a recording's slot (recordedSlot when 0).
	Trace   string `json:"trace,omitempty"`
	Seconds int    `json:"seconds,omitempty"`
	SlotMs  int    `json:"slot_ms,omitempty"`
}

// ciTrace is `ci`'s autorate run: a recorded cellular link's first minute
// (Verizon's LTE in mahimahi's format, ../shared/traces/mahimahi; its
// controllers' table is docs/results.md's), sqmkit's controller alone,
// graded by traceChecks. A minute, not the whole recording: the CI's
// budget; its first minute already holds outages and tenfold swings. Where
// the recordings are absent (a clone without ../shared), the generated lte
// trace's first minute instead, and the run says which it replayed.
func ciTrace(repo string) planRun {
	rec := filepath.Join(filepath.Dir(repo), "shared", "traces", "mahimahi", "Verizon-LTE-short")
	if _, err := os.Stat(rec + ".down"); err == nil {
		return planRun{Profile: "cable", Backends: []string{ctlSqmkit}, Mode: "trace", Trace: rec + ".down," + rec + ".up", Seconds: 60}
	}
	return planRun{Profile: "cable", Backends: []string{ctlSqmkit}, Mode: "trace", Trace: filepath.Join(repo, "lab/traces/lte.trace"), Seconds: 60}
}
