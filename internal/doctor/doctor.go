// Package doctor judges whether a shaper is really on the path, from the
// counters tc and /sys report: dead qdiscs, bypassed shapers, missing
// directions, black-holed ingress redirects, configuration drift, NSS
// firmware quirks, bad sizing and wondershaper-era mistakes. It only reads;
// every finding carries its evidence and a one-sentence fix.
package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Severity orders findings: a report's worst severity sets the exit code.
type Severity int

const (
	OK Severity = iota
	Warn
	Fail
)

func (s Severity) String() string {
	switch s {
	case Warn:
		return "warn"
	case Fail:
		return "fail"
	}
	return "ok"
}

// MarshalText writes the severity as "ok", "warn" or "fail".
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads "ok", "warn" or "fail".
func (s *Severity) UnmarshalText(b []byte) error {
	for _, v := range []Severity{OK, Warn, Fail} {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("severity %q: want ok, warn or fail", b)
}

// Finding is one judgement.
type Finding struct {
	Severity Severity `json:"severity"`
	ID       string   `json:"id"`      // stable name of the check, e.g. "dead-qdisc"
	Subject  string   `json:"subject"` // what it is about, e.g. "wan qdisc nsstbl 100:"
	Evidence []string `json:"evidence"`
	Fix      string   `json:"fix,omitempty"` // one sentence; "" for ok findings
}

// Device is what /sys/class/net/<name> says about one device.
type Device struct {
	Name      string
	Exists    bool
	OperState string // "up", "down", "unknown" (IFBs that are up), ...
	Type      int    // ARPHRD: 1 ethernet, 512 ppp, 768 ipip, ...; 0 unknown
	MTU       int    // 0 unknown
	SpeedMbit int    // 0 unknown
	// TxBytes and RxBytes are valid when HasCounters.
	TxBytes, RxBytes uint64
	HasCounters      bool
}

// Sample is one reading of tc (the live tree, every record with its Dev
// set) and of /sys.
type Sample struct {
	tcstats.Snapshot
	Devices map[string]Device
}

// Expect is what the configuration says one WAN device should have.
type Expect struct {
	Queue config.Queue
	Plan  *plan.Plan // nil when the plan could not be built; mismatch checks are skipped
	// CPU is the queue's last CPU measurement (a test or tune on the
	// router); nil: none this boot.
	CPU *cpuload.Record
}

// Offload is the `config defaults` of an OpenWrt /etc/config/firewall.
type Offload struct {
	Software, Hardware bool // flow_offloading, flow_offloading_hw
}

// Input is everything one run of the doctor judges.
type Input struct {
	Now Sample
	// Prev is an earlier sample Window before Now (--watch); nil judges the
	// totals since boot (devices) and since creation (qdiscs).
	Prev   *Sample
	Window time.Duration
	// Devices are the WAN devices to judge; empty means every device whose
	// root qdisc is not a kernel default, except redirect targets (IFBs),
	// which are judged as the download side of their WAN device.
	Devices []string
	Expect  []Expect // from the sqm config; Queue.Interface names the WAN device
	Offload Offload
	// Web: the findings are read on LuCI's pages, so a fix names what the
	// router's pages do, never a command or a flag (TestWebFixesNameNoFlag).
	Web bool
}

// Diagnosis is the outcome of Check; its JSON form is what `sqmkit doctor
// --json` prints.
type Diagnosis struct {
	Status Severity `json:"status"` // the worst severity among the findings
	// Basis says which counters were judged: "window" (two samples) or
	// "totals" (since boot / since the qdisc was created).
	Basis         string    `json:"basis"`
	WindowSeconds float64   `json:"window_seconds,omitempty"`
	Note          string    `json:"note"`
	Devices       []string  `json:"devices"` // the WAN devices judged
	Findings      []Finding `json:"findings"`
}

// Thresholds, with their reasons (docs/design.md, "What breaks SQM silently").
const (
	// minPackets: a tree that carried fewer packets proves nothing about
	// its idle branches.
	minPackets = 100
	// bypassRatio: a shaper on the path counts (almost) every byte the
	// device sends; below half, most traffic skips it.
	bypassRatio = 0.5
	// minBypassBytes keeps an idle link from being judged.
	minBypassBytes = 1 << 20
	// maxQueueDelay: a queue that holds more than this at the shaped rate
	// lets bloat through before CoDel (or nothing) reacts.
	maxQueueDelay = 100 * time.Millisecond
	// aqmFloor is the plan's minimum fq_codel limit; it is never flagged.
	aqmFloor = 200
	// maxBurstTime: a shaper burst beyond a few ms at rate is a latency spike.
	maxBurstTime = 5 * time.Millisecond
	// htbQuantumCap: the kernel caps computed HTB quanta at 200000 and warns;
	// above ~40 MTUs (60000) one class hogs the link for ms at low rates.
	htbQuantumWarn = 60000
	htbQuantumCap  = 200000
	defaultMTU     = 1500
	ethHeader      = 14
)

// Check judges in and returns the findings, failures first.
func Check(in Input) *Diagnosis {
	c := newChecker(in)
	r := &Diagnosis{Devices: c.wans, Basis: "totals"}
	if in.Prev != nil {
		r.Basis, r.WindowSeconds = "window", in.Window.Seconds()
		r.Note = fmt.Sprintf("counters judged over a %s window", in.Window)
	} else {
		r.Note = "totals since boot (devices) and since creation (qdiscs) were used; run with --watch SECONDS to judge rates and bypass over a window"
		if in.Web {
			r.Note = "totals since boot (devices) and since creation (qdiscs) were used; the live counters on this page show the rates"
		}
	}
	c.run()
	if len(c.wans) == 0 {
		fix := "Start the shaper (`sqmkit start`), or name the WAN device: sqmkit doctor IFACE."
		if in.Web {
			fix = "Enable a queue for the WAN device on Network → SQM QoS, then Save & Apply."
		}
		c.add(Warn, "no-shaper", "system", fix, "no device has a configured root qdisc or an ingress redirect, and no sqm queue names one")
	}
	r.Findings = c.findings
	slices.SortStableFunc(r.Findings, func(a, b Finding) int { return cmp.Compare(b.Severity, a.Severity) })
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	for _, f := range r.Findings {
		r.Status = max(r.Status, f.Severity)
	}
	if r.Devices == nil {
		r.Devices = []string{}
	}
	return r
}
