package refserver

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/sqmkit/sqmkit/internal/rpm"
)

// Stage is one direction of `sqmkit test --rpm`'s printed result: its RPM
// (the current draft's aggregation), the trimmed means it came from, in
// milliseconds, and how many load connections it ended with.
type Stage struct {
	Direction                string
	RPM, TCP, TLS, GET, Load float64
	Conns                    int
}

var sqmkitStage = regexp.MustCompile(`(download|upload): (\d+) RPM on (\d+) connections \(\w+ confidence\): TCP ([\d.]+), TLS ([\d.]+), GET ([\d.]+) ms on new connections, ([\d.]+) ms on loaded ones`)

// Stages reads the two directions from `sqmkit test --rpm`'s output.
func Stages(out []byte) ([]Stage, error) {
	ms := sqmkitStage.FindAllSubmatch(out, -1)
	if len(ms) != 2 {
		return nil, fmt.Errorf("sqmkit test --rpm printed %d stages, want download and upload:\n%s", len(ms), out)
	}
	var st []Stage
	for _, m := range ms {
		f := func(i int) float64 { v, _ := strconv.ParseFloat(string(m[i]), 64); return v }
		st = append(st, Stage{Direction: string(m[1]), RPM: f(2), Conns: int(f(3)), TCP: f(4), TLS: f(5), GET: f(6), Load: f(7)})
	}
	return st, nil
}

// ForeignMs and LoadedMs are the stage's two halves: a foreign probe per
// round trip, and the loaded GET (refserver.Halves has goresponsiveness's).
func (s Stage) ForeignMs() float64 { return (s.TCP + s.TLS + s.GET) / 3 }
func (s Stage) LoadedMs() float64  { return s.Load }

// EarlierDraft is the stage's latencies aggregated as goresponsiveness
// does (the draft's earlier text): 60000 over the mean of the foreign and
// the loaded latencies. docs/commands.md, "Responsiveness (RPM)", says why
// sqmkit prints the current text's figure instead.
func (s Stage) EarlierDraft() float64 {
	return 60000 / ((s.LoadedMs() + s.ForeignMs()) / 2)
}

// GoresponsivenessArgs are goresponsiveness's arguments against url,
// with the draft's parameters where its defaults depart from them (read
// in its source at its pin, docs/results.md has the runs):
//   - --rpm.tmp 95: its trimmed mean keeps the given percentage of the
//     fastest probes (utilities.TrimBy), so its default of 5 averages the
//     fastest 5 %; 95 keeps the fastest 95 %, the draft's TMP.
//   - --rpm.mps ProbeRounds: it reads PTC but never applies it, and at its
//     default of 100 probe rounds a second (each a new TLS connection) its
//     probes take a quarter of a 20 Mbit/s line and starve a small host's
//     CPU.
//   - --debug: only its debug output says how many probe rounds its final
//     window kept (Theirs.Rounds, Kept).
//
// conns, when not 0, is its maximum of connections (--rpm.mnp); 0 keeps
// the draft's 16 (Compare). logs, when not "", is the base name of its
// probe logs (--logger-filename; Halves reads them): a path without a dot,
// since it inserts its suffixes before the first one.
func GoresponsivenessArgs(url string, conns int, logs string) []string {
	mps := strconv.Itoa(ProbeRounds)
	args := []string{"--debug", "--url", url, "--insecure-skip-verify", "--rpm.timeout", "30", "--rpm.tmp", "95", "--rpm.mps", mps}
	if conns > 0 {
		args = append(args, "--rpm.mnp", strconv.Itoa(conns))
	}
	if logs != "" {
		args = append(args, "--logger-filename", logs)
	}
	return args
}

// ProbeRounds is how many probe rounds (a foreign and a self probe) a
// second both clients of a comparison send: sqmkit test's own rate against
// a URL (rpm.DefaultEvery). `sqmkit test --rpm` would send up to the
// draft's PTC of its goodput (four times as many on the lab's cable line),
// each a TLS handshake on the same CPUs as the other client's and nginx's,
// so it is held to the same (--rpm-rate).
const ProbeRounds = int(time.Second / rpm.DefaultEvery)

// Band is how close sqmkit's RPM, its latencies aggregated as
// goresponsiveness does (Stage.EarlierDraft), must come to
// goresponsiveness's against the same server on the same path (issue
// #52), both run with GoresponsivenessArgs, EndpointLowat and
// ClientGSOMax.
const Band = 0.25

// Within says whether ours/theirs lies within band of 1; a NaN (no
// figure) does not.
func Within(ratio, band float64) bool { return ratio >= 1-band && ratio <= 1+band }

// EndpointLowat is the sysctl the namespaces of goresponsiveness and of
// the reference server's nginx get for the comparison: neither sets
// TCP_NOTSENT_LOWAT, so their loaded GETs wait behind their own sockets'
// backlog (nginx's grows for as long as the test runs), where the draft
// asks both test endpoints to keep 5 ms of their throughput unsent (sqmkit
// does, sockopt.Replenish). A namespace-wide mark cannot follow each
// connection's rate; one segment is the nearest fixed one on the lab's
// lines, where sixteen connections share at most 40 Mbit/s. A namespace
// that outlives the comparison gets its LowatSysctl back afterwards.
const (
	LowatSysctl   = "net.ipv4.tcp_notsent_lowat"
	EndpointLowat = LowatSysctl + "=1500"
)

// ClientGSOMax is the gso_max_size the client's device gets for the
// comparison, two segments. The kernel checks a mark only where a write
// starts a buffer, and a buffer takes appends unchecked up to the device's
// GSO size (64 kB): goresponsiveness writes eagerly, so its upload held
// 40-60 kB unsent past the mark and its self probes measured its own
// socket. Two segments per buffer hold it to the mark; sqmkit ends each
// write's buffer itself (sockopt's writeEnded) and does not need it
// (docs/results.md has the lab's counts).
const ClientGSOMax = "3000"

// Theirs is one direction of goresponsiveness's result: its RPM (the
// single-sided trimmed mean; NaN when its last window held no probe), how
// many load connections it ended with (0: its load generator gave up),
// and, from its --debug output, how many probe rounds it started in its
// final window (Rounds) and how many of them returned (Kept). It stops
// the rounds still running when a direction ends, and a round (a foreign
// probe, then a self probe) takes seconds on a bloated path, so its
// figure can be of the fastest few (docs/lab-notes.md, "goresponsiveness's
// final window on the unshaped download"; TestParse).
type Theirs struct {
	RPM          float64
	Conns        int
	Rounds, Kept int
	// Mbps is its goodput (0: not printed); Foreign and Loaded its final
	// window's two halves in ms (a foreign probe per round trip, a loaded
	// GET), from its probe logs (Halves); 0 without them.
	Mbps            float64
	Foreign, Loaded float64
}

// Measured says whether goresponsiveness measured the direction under
// load: a load generator that gave up left the link unloaded, and a NaN
// or an infinite RPM is no figure.
func (t Theirs) Measured() bool {
	return t.Conns > 0 && !math.IsNaN(t.RPM) && !math.IsInf(t.RPM, 0)
}

var (
	theirStage  = regexp.MustCompile(`(?s)(Download|Upload):(.*?)using (\d+) parallel connections.*?RPM:\s+(\S+) \(Single-Sided`)
	theirMbps   = regexp.MustCompile(`Throughput: ([\d.]+) Mbps`)
	theirBounds = regexp.MustCompile(`(?ms)^(Download|Upload):\n.*?Bucket bounds: \((\d+), (\d+)\)`)
	theirRound  = regexp.MustCompile(`(?m)^(Download|Upload): (Reserving|Filling) a responsiveness bucket with id (\d+)\b`)
)

// Goresponsiveness reads goresponsiveness's download and upload results;
// with --debug also each direction's final window (Theirs.Rounds, Kept).
func Goresponsiveness(out []byte) (down, up Theirs, err error) {
	got := map[string]Theirs{}
	for _, m := range theirStage.FindAllSubmatch(out, -1) {
		mbps := 0.0
		if t := theirMbps.FindSubmatch(m[2]); t != nil {
			mbps, _ = strconv.ParseFloat(string(t[1]), 64)
		}
		n, _ := strconv.Atoi(string(m[3]))
		v, err := strconv.ParseFloat(string(m[4]), 64)
		if err != nil {
			return down, up, fmt.Errorf("goresponsiveness's %s RPM %q: %w", m[1], m[4], err)
		}
		got[string(m[1])] = Theirs{RPM: v, Conns: n, Mbps: mbps}
	}
	down, okd := got["Download"]
	up, oku := got["Upload"]
	if !okd || !oku {
		return down, up, fmt.Errorf("goresponsiveness printed no download and upload RPM:\n%s", out)
	}
	rounds := theirRound.FindAllSubmatch(out, -1)
	for _, b := range theirBounds.FindAllSubmatch(out, -1) {
		lo, _ := strconv.Atoi(string(b[2]))
		hi, _ := strconv.Atoi(string(b[3]))
		t := map[string]*Theirs{"Download": &down, "Upload": &up}[string(b[1])]
		for _, r := range rounds {
			id, _ := strconv.Atoi(string(r[3]))
			if string(r[1]) != string(b[1]) || id < lo || id > hi {
				continue
			}
			if string(r[2]) == "Reserving" {
				t.Rounds++
			} else {
				t.Kept++
			}
		}
	}
	return down, up, nil
}
