package search

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Kind is a loaded phase, named as the test names it (bbresult).
type Kind string

const (
	Download Kind = bbresult.PhaseDownload
	Upload   Kind = bbresult.PhaseUpload
	Bidir    Kind = bbresult.PhaseBidir
)

// Target is the latency a rate must keep in its loaded phase: a grade's
// bar (bbresult.Bar, the one definition).
type Target = bbresult.Bar

// The targets, the grades' bars.
var (
	APlus = bbresult.APlus
	A     = bbresult.A
)

// Targets by name.
var Targets = map[string]Target{"A+": APlus, "A": A}

// weaker is the grade a direction settles for when no rate down to Floor
// meets the target asked for. A+ is out of reach where one full-size
// packet on the wire takes about as long as its bar (1 Mbit/s ATM
// upstream: 13.6 ms); a user there wants the highest rate that keeps the
// best grade the link allows, not no answer. Below A (30 ms) something
// other than the line's buffer adds the delay, which no rate fixes.
var weaker = map[string]Target{"A+": A}

// Phase is one loaded phase's outcome.
type Phase struct {
	AddedMedian, AddedP95 float64 // ms
	// AddedDown, AddedUp are the median one-way added delays (0: not
	// measured): which direction queued.
	AddedDown, AddedUp float64
	DownKbit, UpKbit   int // goodput
	// PerSecond is the goodput of the loaded direction per second (the
	// line measurement's boost detection reads it).
	PerSecond []int
	// IPv6: the test ran over IPv6, whose packets carry 20 bytes more
	// header and less payload (RatePerGoodput is IPv4's).
	IPv6 bool
	// CPU is what the phase cost the router's CPU (cpuload); nil when not
	// measured (the search runs elsewhere than on the router).
	CPU *bbresult.PhaseCPU
}

func (p Phase) goodput(k Kind) int {
	if k == Upload {
		return p.UpKbit
	}
	return p.DownKbit
}

// Link is what a search drives.
type Link interface {
	// SetRates moves the shaper; 0 keeps a direction's rate.
	SetRates(ctx context.Context, down, up int) error
	// Load runs one loaded phase of kind k, n long.
	Load(ctx context.Context, k Kind, n Length) (Phase, error)
	// SlowUpload says, before the first search step, that the upload's
	// line is slow (slowLine): a link that sends its own upload then
	// sends it one segment per packet, as a router's clients' packets
	// arrive (Live: bbclient.Config.OneSegment).
	SlowUpload()
}

// Length is how long a loaded phase runs.
type Length int

const (
	// StepPhase is a search step.
	StepPhase Length = iota
	// LongPhase is a bidirectional step on a slow line (Result.longBidir):
	// the test time of LongSteps search steps.
	LongPhase
	// LinePhase is the unshaped measurement of the line itself.
	LinePhase
)

// LongSteps is what a LongPhase costs, in search steps.
const LongSteps = 2

// Config is one search.
type Config struct {
	Target Target
	// Open are rates far above the line: the shaper stays on the path but
	// never limits, so the line itself is measured.
	OpenDown, OpenUp int
	// RatePerGoodput converts TCP goodput to the shaper's rate: the framing
	// (IP, TCP, link overhead) the shaper counts and goodput does not.
	RatePerGoodput float64
	// AckUncounted is the shaper rate a direction's count misses per
	// kbit/s of the other direction's goodput (AckUncounted): its line
	// beside that direction's stream is lower by that much.
	AckUncounted float64
	// ProbeKbit is the shaper rate the test's probes took beside the
	// streams while the line was measured (ProbeKbit).
	ProbeKbit float64
	// Resolution is the search's step, a share of the line rate.
	Resolution float64
	// MaxSteps bounds the loaded phases after the two line measurements
	// (0: no bound); a session derives it from its test-time budget. Steps
	// that only refine (a finer bisection, a look above the line, a second
	// phase of a borderline step) give way to it; the ones every answer
	// needs do not.
	MaxSteps int
	Progress func(string) // one line per step
}

// Line is a measured line rate.
type Line struct {
	GoodputKbit int // sustained: the mean of the last third of the phase
	RateKbit    int // the shaper rate that carries that goodput
	// BoostKbit is the goodput of the first seconds when it was more than
	// BoostRatio of the sustained one: a cable modem's token-bucket boost,
	// which a one-off speed test reports as the line rate. 0: none seen.
	BoostKbit int
	// PerSecond is the measurement itself, goodput per second.
	PerSecond []int
	// CPU: the router's busiest core was saturated while the shaper was
	// open, so the "line" is the router's ceiling, not the line's
	// (cpuload.BoundShare); nil when not CPU-bound or not measured.
	CPU *bbresult.PhaseCPU `json:",omitempty"`
}

// BoostRatio: first-seconds goodput above this share of the sustained one
// is a boost, not noise (TCP's slow start undershoots, it never
// overshoots by a tenth for seconds).
const BoostRatio = 1.1

// Step is one rate tried.
type Step struct {
	Kind                  Kind
	RateKbit              int     // of the direction searched; the other one's in Other
	Other                 int     // bidirectional: the upload rate
	Share                 float64 // of the line rate
	AddedMedian, AddedP95 float64
	// AddedDown, AddedUp are the one-way added medians (0: not
	// measured): which direction's queue the step's delay was.
	AddedDown, AddedUp float64
	GoodputKbit        int
	Pass               bool
	Target             string // the grade it was judged against
	Again              bool   // borderline: measured twice, judged on the mean
	// Unsettled: a borderline pass the budget had no phase to measure
	// again: a one-way step counts it a miss; a bidirectional one stands
	// but lowers a direction at its line (atLineUnsettled).
	Unsettled bool
}

// Choice is one direction's result.
type Choice struct {
	Line     Line
	RateKbit int
	// Target is the grade this direction was tuned for: the one asked
	// for, or the next weaker one when no rate met it (OutOfReach says
	// why).
	Target     Target
	OutOfReach string
	Rule95     int    // 95 % of the measured line rate: the usual advice
	Why        string // how the rate was chosen
	// Rules are the decisions Why tells, in order, for tests and --json
	// readers: what a Why says in words is a Rule here.
	Rules []Rule `json:",omitempty"`
	// AckKbit is the other direction's ACK framing this shaper does not
	// count at that direction's line (Config.AckUncounted).
	AckKbit int
	// Slow: this direction's line is slow (slowLine).
	Slow bool
	// GoodputKbit at the chosen rate (the search's step; a session puts
	// the confirming test's there) and at the 95 % rule's rate (0 when
	// that step missed the target).
	GoodputKbit, Rule95Goodput int
}

// Rule is one decision on a direction's rate.
type Rule string

// The rules a Choice's rate can go through.
const (
	RuleBisected        Rule = "bisected"        // the highest rate meeting the target, between a pass and a miss
	RuleAtLine          Rule = "at-line"         // the line rate meets the target and is taken
	RuleAboveLine       Rule = "above-line"      // a pass above the line that carried more: the line read low
	RuleUncarried       Rule = "uncarried"       // a pass above the line carried no more than the line: not taken
	RuleNotBloated      Rule = "not-bloated"     // the line meets the target well above its rate
	RuleKneeAtLine      Rule = "knee-at-line"    // the line rate meets the target near a bar
	RuleBoost           Rule = "boost"           // above the line a step measures a boost's bucket
	RuleUnderLine       Rule = "under-line"      // one step under a knee at or near the line
	RuleOutOfReach      Rule = "out-of-reach"    // settled for the weaker grade
	RuleBudgetBound     Rule = "budget"          // the test-time budget cut a search or a measurement short
	RuleAckFraming      Rule = "ack-framing"     // lower beside the other direction's ACKs
	RuleBackToLine      Rule = "back-to-line"    // back to the line for the bidirectional phase
	RuleLowered         Rule = "lowered"         // lowered for the bidirectional phase
	RuleUnmeasured      Rule = "unmeasured"      // no phase left to measure a lowering: the confirm does
	RuleFlatFrontier    Rule = "flat-frontier"   // the bidirectional delay did not fall as the rates came down
	RuleUselessLowering Rule = "lowering-undone" // lowering it did not lower the bidirectional delay
	RuleEdgeAtLine      Rule = "edge-at-line"    // lowered from the line after a pass on the edge
	RuleConfirmLowered  Rule = "confirm-lowered" // lowered after the confirming test missed by a little
	RuleNoRoomToConfirm Rule = "unconfirmed"     // no room to confirm a lowering again
	RuleCPUBound        Rule = "cpu-bound"       // lowered with the other direction to fit the router's busiest core
)

// because says why the rate is what it is, replacing what was said.
func (c *Choice) because(r Rule, format string, a ...any) {
	c.Why, c.Rules = fmt.Sprintf(format, a...), []Rule{r}
}

// also adds a decision to what was said.
func (c *Choice) also(r Rule, format string, a ...any) {
	c.Why += fmt.Sprintf(format, a...)
	c.Rules = append(c.Rules, r)
}

// Has says whether the rate went through rule r.
func (c Choice) Has(r Rule) bool { return slices.Contains(c.Rules, r) }

// Result is a whole search.
type Result struct {
	Target         Target
	Download       Choice
	Upload         Choice
	Steps          []Step
	BidirLowered   int // times both rates were lowered for the bidirectional phase
	ConfirmLowered int // times the confirming test's borderline miss lowered them (at most once)
	BidirMedian    float64
	BidirP95       float64
	BidirGoodputDn int
	BidirGoodputUp int
	// BidirTarget is the weaker grade the bidirectional phase is judged
	// against when its delay did not fall as the rates came down
	// (flatBidir); BidirOutOfReach says why. Empty: the phase's target is
	// the directions' (target).
	BidirTarget     Target
	BidirOutOfReach string
	// BidirCPU: with both directions loaded the router's busiest core was
	// saturated, and the rates were lowered to fit it (cpuLower); nil when
	// not.
	BidirCPU *bbresult.PhaseCPU `json:",omitempty"`
}

// longBidir: a line is slow (Choice.Slow), so every bidirectional phase,
// the search's and the confirming test's, is a LongPhase.
func (r *Result) longBidir() bool { return r.Download.Slow || r.Upload.Slow }

// ErrNoRate: no rate down to Floor of the line met the target.
var ErrNoRate = errors.New("no rate meets the target")
