// Package bbresult holds the result of one bufferbloat test: every sample
// and the summary, in the shape written to --json (schema documented in
// docs/json-schema.md) and read back by --compare, plots and flent export.
package bbresult

import (
	"strconv"
	"strings"
	"time"
)

// SchemaVersion changes whenever a field changes meaning or is removed.
const SchemaVersion = 1

// Phase names, in the order the default test runs them.
const (
	PhaseIdleBefore = "idle_before"
	PhaseDownload   = "download"
	PhaseUpload     = "upload"
	PhaseBidir      = "bidirectional"
	PhaseIdleAfter  = "idle_after"
)

// Result is one run of `sqmkit test`. Times in samples are seconds since
// Started; latencies are milliseconds; rates are Mbit/s of goodput.
type Result struct {
	SchemaVersion int       `json:"schema_version"`
	Tool          string    `json:"tool"` // "sqmkit <version>"
	Started       time.Time `json:"started"`
	Server        string    `json:"server"`      // as the user typed it
	ServerAddr    string    `json:"server_addr"` // the address actually used, "ip:port"
	Family        string    `json:"family"`      // "ipv4" or "ipv6"
	Streams       int       `json:"streams"`     // TCP streams per loaded direction
	ProbeInterval float64   `json:"probe_interval_ms"`
	IdleRTT       float64   `json:"idle_rtt_ms"` // median probe RTT over both idle phases

	Phases  []Phase  `json:"phases"`
	Grades  Grades   `json:"grades"`
	Samples Samples  `json:"samples"`
	Notes   []string `json:"notes,omitempty"` // e.g. "path looks asymmetric: ..."
	// Incomplete says why the measurement is not whole (streams failed, the
	// server ended the test early); "" when it is. Its figures stand, but a
	// caller that compares runs (tune) must not trust them.
	Incomplete string `json:"incomplete,omitempty"`
	RPM        *RPM   `json:"rpm,omitempty"`
	// RTTOnly: the server gives round trips only (a responsiveness server:
	// its probes are TCP handshakes), so there is no one-way split and a
	// lost probe's direction is unknown (LostEither).
	RTTOnly bool `json:"rtt_only,omitempty"`
	// Queue is the router's queue the test's route leaves through, when it
	// ran on the router; PathChecks its shaper's counters beside each
	// loaded phase's goodput (package onpath).
	Queue      string      `json:"queue,omitempty"`
	PathChecks []PathCheck `json:"path_checks,omitempty"`
	// CPU is what each loaded phase cost the router's CPU, when the test
	// ran on the router (package cpuload).
	CPU []PhaseCPU `json:"cpu,omitempty"`
}

// PhaseCPU is one loaded phase's CPU cost on the router and the shaping
// ceiling it implies.
type PhaseCPU struct {
	Phase string `json:"phase"`
	// From and To are the samples the figures span (within the phase).
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	ShapedMbps float64   `json:"shaped_mbps"` // the phase's goodput, both directions
	CPUs       int       `json:"cpus"`
	// BusyCores is the CPU time spent per second, in cores, without the
	// test's own process; MsPerMbit that per shaped Mbit/s.
	BusyCores float64 `json:"busy_cores"`
	MsPerMbit float64 `json:"ms_per_mbit"`
	// SelfCores is the test's own process (its load and TLS), in cores:
	// on a small router it competes with the shaper it measures.
	SelfCores float64 `json:"self_cores"`
	// Busiest is the core that ran most (its share of the phase, and the
	// share of that in softirq: packet processing).
	Busiest        int     `json:"busiest_cpu"`
	BusiestShare   float64 `json:"busiest_share"`
	BusiestSoftirq float64 `json:"busiest_softirq_share"`
	// NetRxCPU handled the largest share (NetRxShare) of the network
	// receive softirqs; RPS is the receive steering mask of the queue's
	// Device ("" when off or unknown).
	NetRxCPU   int     `json:"net_rx_cpu"`
	NetRxShare float64 `json:"net_rx_share"`
	// NetTx* are the same of the transmit softirqs, IRQ* of the
	// interrupts whose lines name the Device; XPS its transmit steering.
	NetTxCPU   int     `json:"net_tx_cpu"`
	NetTxShare float64 `json:"net_tx_share"`
	IRQCPU     int     `json:"irq_cpu"`
	IRQShare   float64 `json:"irq_share"`
	Device     string  `json:"device,omitempty"`
	RPS        string  `json:"rps,omitempty"`
	XPS        string  `json:"xps,omitempty"`
	// CeilingMbps is the rate at which the busiest core (or all cores)
	// would be saturated, if its load grows with the rate; Bound: the
	// busiest core was already saturated.
	CeilingMbps float64 `json:"ceiling_mbps"`
	Bound       bool    `json:"cpu_bound"`
}

// PathCheck is one loaded phase's goodput in one direction beside what
// the queue's shaper counted meanwhile.
type PathCheck struct {
	Phase       string  `json:"phase"`
	Direction   string  `json:"direction"` // "download" or "upload"
	GoodputMbps float64 `json:"goodput_mbps"`
	CountedMbps float64 `json:"counted_mbps"`
	// Verdict: "agrees"; "bypassed" (the shaper counted much less: the
	// traffic did not pass it); "shared" (much more: other traffic).
	Verdict string `json:"verdict"`
}

// Ungrade takes every grade off a result that is not whole (Incomplete):
// what it measured stands, graded it is not, so nothing reads a cut-short
// run as a pass (TestIncompleteNotGraded).
func (r *Result) Ungrade() {
	r.Grades = Grades{}
	for i := range r.Phases {
		r.Phases[i].Grade = ""
	}
}

// Phase summarises one phase of the test.
type Phase struct {
	Name  string  `json:"name"`
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`

	DownloadMbps float64 `json:"download_mbps"`
	UploadMbps   float64 `json:"upload_mbps"`

	Latency Stats `json:"latency_ms"`        // UDP probe round trips
	InFlow  Stats `json:"inflow_latency_ms"` // small request/response inside loaded TCP streams

	AddedMean   float64 `json:"added_mean_ms"`   // Latency.Mean − idle mean
	AddedMedian float64 `json:"added_median_ms"` // Latency.Median − idle median
	AddedP95    float64 `json:"added_p95_ms"`    // Latency.P95 − idle median
	AddedP99    float64 `json:"added_p99_ms"`    // Latency.P99 − idle median
	AddedUp     float64 `json:"added_up_ms"`     // median one-way queueing delay client→server
	AddedDown   float64 `json:"added_down_ms"`   // median one-way queueing delay server→client

	ProbesSent int    `json:"probes_sent"`
	LostUp     int    `json:"lost_up"`   // probes the server never saw
	LostDown   int    `json:"lost_down"` // replies the client never saw
	Reordered  int    `json:"reordered"`
	Grade      string `json:"grade"` // from AddedMean (A+ … F); "" for idle phases

	// FlowsAdded is each probe flow's median round trip minus the idle
	// median (index = Probe.Flow): one far above the others shared a
	// queue with a bulk flow (CollidedFlow).
	FlowsAdded []float64 `json:"probe_flows_added_median_ms,omitempty"`
}

// Collision thresholds: a probe flow whose median added latency is at
// least collisionGapMs above every other flow's, and at least twice the
// next one's, did not wait where the others did. Between flows of one
// phase the medians of a few hundred probes differ by a fraction of a
// millisecond; a flow that shares a hash bucket with a bulk flow waits
// behind that flow's packets under CoDel's control: its target (5 ms) or
// more.
const (
	collisionGapMs   = 3
	collisionRatio   = 2
	collisionMinFlow = 3 // flows needed to tell one from the rest
)

// CollidedFlow is the probe flow that shared a queue with a bulk flow in
// p, if one did: a hash collision in a flow-queueing qdisc with few
// queues (fq_codel and NSS's nssfq_codel hash into 1024; CAKE's
// set-associative hash avoids nearly all). A collision is the luck of one
// flow, not the shaper's rate: every flow but one calm says so.
func (p Phase) CollidedFlow() (flow int, ok bool) {
	if len(p.FlowsAdded) < collisionMinFlow {
		return 0, false
	}
	worst, second := -1, -1
	for i, v := range p.FlowsAdded {
		switch {
		case worst < 0 || v > p.FlowsAdded[worst]:
			worst, second = i, worst
		case second < 0 || v > p.FlowsAdded[second]:
			second = i
		}
	}
	w, s := p.FlowsAdded[worst], p.FlowsAdded[second]
	if w-s >= collisionGapMs && w >= collisionRatio*max(s, 0) {
		return worst, true
	}
	return 0, false
}

// Stats are order statistics of a set of millisecond values.
type Stats struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
}

// Grades are the overall verdicts. Basis names the latency series the grades
// use ("udp_probes").
type Grades struct {
	DSLReports        string  `json:"dslreports"`          // mean(download added mean, upload added mean)
	DSLReportsAddedMs float64 `json:"dslreports_added_ms"` //
	Percentile        string  `json:"percentile"`          // worst p95 added latency of the loaded phases
	PercentileAddedMs float64 `json:"percentile_added_ms"`
	Basis             string  `json:"basis"`
}

// Samples are the raw time series.
type Samples struct {
	Probes     []Probe      `json:"probes"`
	Throughput []Throughput `json:"throughput"`
	InFlow     []InFlow     `json:"inflow"`
}

// Probe is one UDP latency probe. Lost is "", "up" or "down"; RTT and the
// one-way values are 0 when lost. Up and Down are one-way delays after the
// clock-offset correction, so their idle values are near RTT/2 only on a
// symmetric path.
type Probe struct {
	T    float64 `json:"t"`
	Seq  uint32  `json:"seq"`
	RTT  float64 `json:"rtt_ms"`
	Up   float64 `json:"up_ms"`
	Down float64 `json:"down_ms"`
	Lost string  `json:"lost,omitempty"`
	// Flow is the probe flow (UDP source port) it was sent on, 0 to
	// ProbeFlows-1 (added in schema 1 without a bump).
	Flow int `json:"flow"`
}

// Throughput is goodput over one sampling interval ending at T.
type Throughput struct {
	T        float64 `json:"t"`
	Download float64 `json:"download_mbps"`
	Upload   float64 `json:"upload_mbps"`
	// Per stream, index i = the i-th stream of its direction; absent while
	// no stream of that direction runs.
	DownloadStreams []float64 `json:"download_streams_mbps,omitempty"`
	UploadStreams   []float64 `json:"upload_streams_mbps,omitempty"`
}

// InFlow is one request/response time measured inside a loaded TCP stream.
type InFlow struct {
	T   float64 `json:"t"`
	Dir string  `json:"dir"` // "down" (on a download stream) or "up"
	RTT float64 `json:"rtt_ms"`
}

// RPM is the result of a Responsiveness-under-Working-Conditions run.
type RPM struct {
	URL          string  `json:"url"`
	RPM          float64 `json:"rpm"`
	DownloadMbps float64 `json:"download_mbps"`
	UploadMbps   float64 `json:"upload_mbps"`
}

// Bar is a pass mark on a loaded phase's added latency: its median and
// its 95th percentile. One definition of each, used by the test's grade
// letters, tune's targets and the lab's acceptance.
type Bar struct {
	Name     string
	MedianMs float64
	P95Ms    float64
}

// The bars. A+ and A are the grade letters' bounds (5 and 30 ms), with a
// p95 three times the median; the lab's bidirectional phase, whose
// download ACK clock turns bursty with both directions loaded, has its own
// (lab/README.md, "Grading and bars").
var (
	APlus    = Bar{"A+", 5, 15}
	A        = Bar{"A", 30, 90}
	LabBidir = Bar{"bidirectional", 10, 30}
)

// Meets says whether a phase's added median and p95 are within b.
func (b Bar) Meets(medianMs, p95Ms float64) bool { return medianMs <= b.MedianMs && p95Ms <= b.P95Ms }

// Grade maps added latency in milliseconds to the Waveform/DSLReports letters.
func Grade(addedMs float64) string {
	switch {
	case addedMs < APlus.MedianMs:
		return "A+"
	case addedMs < A.MedianMs:
		return "A"
	case addedMs < 60:
		return "B"
	case addedMs < 200:
		return "C"
	case addedMs < 400:
		return "D"
	}
	return "F"
}

// FamilyName is how reports write a Family: "IPv4", "IPv6", or "family X"
// for a value this version does not know ("family -" when empty).
func FamilyName(family string) string {
	switch family {
	case "ipv4":
		return "IPv4"
	case "ipv6":
		return "IPv6"
	case "":
		return "family -"
	}
	return "family " + family
}

// Fixed writes v with d decimals, never as "-0" or "-0.0": a delay that
// rounds to zero is zero in every table, grade line and plot title
// (TestFixedNoNegativeZero).
func Fixed(v float64, d int) string {
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.Trim(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-")
	}
	return s
}

// Signed is Fixed with a sign always shown: "+0.0", never "-0.0" nor
// "+-0.3".
func Signed(v float64, d int) string {
	s := Fixed(v, d)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// Grades.Basis: the UDP probes of sqmkit's server, or the TCP handshakes
// to a responsiveness server (an RTTOnly result).
const (
	BasisProbes     = "udp_probes"
	BasisHandshakes = "tcp_handshakes"
)

// LostEither is a lost probe of an RTTOnly result: which way it was lost
// is unknown; a phase counts it under LostUp.
const LostEither = "either"
