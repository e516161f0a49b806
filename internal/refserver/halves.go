package refserver

import (
	"bufio"
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The RPM is the mean of two halves: the foreign probes' (a new
// connection's TCP, TLS and GET, each a round trip) and the loaded ones'
// (a GET on a load connection). goresponsiveness prints only their
// aggregate; its probe logs (--logger-filename) hold every probe, which
// Halves reads, so each half compares on its own (Yardstick).

// probeRow is one line of goresponsiveness's probe log: its duration in
// seconds, its round trips and its type (SelfUp, SelfDown, Foreign).
type probeRow struct {
	seconds float64
	trips   float64
	kind    string
}

// readProbes parses a goresponsiveness probe log: a header line, then one
// comma-separated row per probe (Time, RoundTripCount, Duration, TCPRtt,
// TCPCwnd, Type, CongestionControl).
func readProbes(csv []byte) []probeRow {
	var rows []probeRow
	sc := bufio.NewScanner(bytes.NewReader(csv))
	for first := true; sc.Scan(); first = false {
		f := strings.Split(sc.Text(), ",")
		if first || len(f) < 6 {
			continue
		}
		trips, err1 := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		secs, err2 := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err1 != nil || err2 != nil || trips <= 0 {
			continue
		}
		rows = append(rows, probeRow{seconds: secs, trips: trips, kind: strings.TrimSpace(f[5])})
	}
	return rows
}

// Halves fills each direction's foreign and loaded halves (Theirs.Foreign,
// Loaded; ms) from goresponsiveness's self and foreign probe logs. Its
// self probes name their direction; its foreign ones do not, but each
// round logs one of each, the download's rounds first, so the first
// rounds-of-the-download foreign rows are the download's. Each half is
// its final window's (the last Kept rounds; all when Kept is 0), averaged
// as goresponsiveness averages (TrimmedMean: the fastest 95 %), the
// foreign probe per round trip.
func Halves(self, foreign []byte, th *[2]Theirs) {
	var selves [2][]float64
	for _, r := range readProbes(self) {
		switch r.kind {
		case "SelfDown":
			selves[0] = append(selves[0], 1000*r.seconds)
		case "SelfUp":
			selves[1] = append(selves[1], 1000*r.seconds)
		}
	}
	var foreigns []float64
	for _, r := range readProbes(foreign) {
		if r.kind == "Foreign" {
			foreigns = append(foreigns, 1000*r.seconds/r.trips)
		}
	}
	split := min(len(selves[0]), len(foreigns))
	per := [2][]float64{foreigns[:split], foreigns[split:]}
	for i := range th {
		last := func(v []float64) []float64 {
			if k := th[i].Kept; k > 0 && k < len(v) {
				return v[len(v)-k:]
			}
			return v
		}
		th[i].Foreign, th[i].Loaded = TrimmedMean(last(per[i])), TrimmedMean(last(selves[i]))
		if math.IsNaN(th[i].Foreign) || math.IsNaN(th[i].Loaded) {
			th[i].Foreign, th[i].Loaded = 0, 0 // a half without probes: no figure
		}
	}
}

// TrimmedMean is goresponsiveness's single-sided trimmed mean at the
// draft's TMP: the mean of the fastest 95 % (NaN of none).
func TrimmedMean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	s = s[:max(1, int(math.Ceil(0.95*float64(len(s)))))]
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

// FrameBytes is goresponsiveness's upload write over HTTP/2: a DATA frame
// of 16 kB, which its loaded GET on the same connection waits behind.
const FrameBytes = 16 << 10

// FrameMs is how long one such frame takes at a connection's share of mbps
// over conns connections.
func FrameMs(mbps float64, conns int) float64 {
	if mbps <= 0 || conns <= 0 {
		return math.NaN()
	}
	return FrameBytes * 8 / (mbps * 1000 / float64(conns))
}
