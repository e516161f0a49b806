// Package linkemu turns a link profile into the modem's qdiscs: the base
// delay, a shaper at line rate, a deep FIFO and the wire's framing, so the
// lab's bottleneck behaves like a bloated cable/DSL/fiber modem.
package linkemu

import (
	"fmt"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// ethHeader is what skb->len already holds on an Ethernet device besides
// the IP packet (destination, source, ethertype; the FCS is not in the skb).
const ethHeader = 14

// Rate is the shaper rate in kbit/s for one direction. PTM's 64/65
// encoding costs rate, not bytes per packet, so it is taken off the rate.
func Rate(p *profile.Profile, d config.Direction) int {
	r := p.Down
	if d == config.Upload {
		r = p.Up
	}
	if p.LinkLayer == "ptm" {
		r = r * 64 / 65
	}
	return r
}

// boostPeakFrames full-size frames (maxFrame bytes, with room for the
// stab's overhead) fit the boost's peak bucket at least.
const (
	boostPeakFrames = 10
	maxFrame        = 1600
)

// bucketMs is how long a tbf of the emulated line may go unserved and
// still carry its rate: its bucket holds that many ms of tokens. A real
// line's serializer does not lose capacity while a CPU is busy; tbf does
// whenever its timer fires later than its bucket lasts, which in the
// emulated guest under load happens often past 2 ms, so the modem carried
// less than its line and the shaper above it sat over the line it shaped
// for (docs/lab-notes.md has the A/B). The price: a burst above the line's
// rate passes up to 10 ms of it at once to the router's ingress shaper.
// Providers' shapers have buckets of that order (DOCSIS' maximum traffic
// burst, a BNG's committed burst), so this is still a line users have.
const bucketMs = 10

// Batch returns the `tc -batch` lines for the modem's egress device dev,
// which carries direction d: the download on the device facing the router,
// the upload on the one facing the internet.
//
// netem is the root so the delay line comes first and the queue forms in the
// tbf child behind it (its byte limit is the buffer: rate × buffer_ms). The
// stab on the root makes every packet cost its wire size in the tbf:
// profile overhead minus the headers already in skb->len on that device (the
// router-facing device also carries VLAN and PPPoE headers).
func Batch(p *profile.Profile, dev string, d config.Direction) []string {
	rate := Rate(p, d)
	over := p.Overhead - ethHeader
	if d == config.Download {
		over -= p.Encap.HeaderBytes()
	}
	stab := fmt.Sprintf("stab overhead %d linklayer ethernet mpu 64", over)
	if p.LinkLayer == "atm" {
		stab = fmt.Sprintf("stab overhead %d linklayer atm", over)
	}
	burst, limit := sizes(rate, p.BufferMs)
	shaper := fmt.Sprintf("tbf rate %dkbit burst %d limit %d", rate, burst, limit)
	if p.BoostMB > 0 && d == config.Download {
		// A cable modem's boost: a token bucket of BoostMB at the line
		// rate, drained at most at the boost rate (tbf's peak bucket,
		// mtu); after an idle spell the bucket is full again. The peak
		// bucket holds ten frames: with one, tbf waits on a timer for
		// every frame, and in the emulated guest those waits ran late
		// enough that the modem carried less than the line; a DOCSIS modem
		// sends in bursts of grants anyway.
		peak := rate * p.BoostPct / 100
		shaper = fmt.Sprintf("tbf rate %dkbit burst %d peakrate %dkbit mtu %d limit %d",
			rate, p.BoostMB*1000000, peak, max(boostPeakFrames*maxFrame, bucketMs*peak/8), limit)
	}
	// netem counts the packets queued in its child against its own limit.
	return []string{
		fmt.Sprintf("qdisc replace dev %s root handle 1: %s netem delay %dus limit 100000", dev, stab, p.RTTms*500),
		fmt.Sprintf("qdisc replace dev %s parent 1:1 handle 10: %s", dev, shaper),
	}
}

// Change is the tc line that moves direction d's bottleneck on dev to
// rate kbit/s (a capacity trace), keeping the profile's buffer in bytes:
// a modem's buffer is memory, so at a lower rate it holds more time.
func Change(p *profile.Profile, dev string, d config.Direction, rate int) []string {
	burst, _ := sizes(rate, p.BufferMs)
	_, limit := sizes(Rate(p, d), p.BufferMs)
	return []string{"qdisc", "change", "dev", dev, "parent", "1:1", "handle", "10:", "tbf",
		"rate", fmt.Sprintf("%dkbit", rate), "burst", fmt.Sprint(burst), "limit", fmt.Sprint(limit)}
}

// sizes are a tbf's burst and limit in bytes at rate kbit/s: bucketMs
// of tokens, but never less than two worst-case frames (an ATM-expanded
// 1500-byte packet is 1696 bytes); bufferMs of the rate.
func sizes(rate, bufferMs int) (burst, limit int) {
	bytesPerMs := rate / 8 // kbit/s → bytes per ms
	burst = max(bucketMs*bytesPerMs, 4000)
	return burst, max(bytesPerMs*bufferMs, 2*burst)
}

// A recorded trace's slots on the modem (Slot): a slot's opportunities
// are its bytes, delivered as its first moment allows, then none until
// the next slot; a slot with none is an outage. tbf resets its tokens to
// its whole bucket on every change, so each slot's change makes the bucket
// the slot's bytes and the rate next to nothing: the slot carries its
// bytes and not one more, whatever tokens the last one left. A bucket
// smaller than a packet would drop the packet, so an outage instead
// blocks a plug queued under the tbf (RecordedSetup), which holds the
// packets, up to the modem's buffer, until the next slot releases them.

// plugHandle is the plug's handle under the tbf (10:).
const plugHandle = "20:"

// trickle is the rate of a slot's tbf, whose bucket carries the slot: a
// hundredth of the bucket a second, next to nothing in a slot, and a
// bucket tc can still time (at 1 byte/s, tc refuses a bucket over 274
// bytes as out of range; TestSlot).
func trickle(burst int) string { return fmt.Sprintf("%dbit", 8*max(1, (burst+99)/100)) }

// RecordedSetup are the tc lines that put a plug holding limit bytes (the
// modem's buffer) under dev's tbf and open it.
func RecordedSetup(dev string, limit int) [][]string {
	return [][]string{
		{"qdisc", "replace", "dev", dev, "parent", "10:1", "handle", plugHandle, "plug", "limit", fmt.Sprint(limit)},
		{"qdisc", "change", "dev", dev, "parent", "10:1", "handle", plugHandle, "plug", "release_indefinite"},
	}
}

// Frame is what the modem's stab counts for a 1500-byte IP packet, the
// packet one of a recorded trace's opportunities delivers: its wire
// overhead added, in ATM cells on an ATM line.
func Frame(p *profile.Profile) int {
	n := 1500 + p.Overhead
	if p.LinkLayer == "atm" {
		n = (n + 47) / 48 * 53
	}
	return n
}

// Slot is the tc lines for one slot of a recorded trace on dev: its
// opportunities, each a frame's bytes (Frame). blocked says whether the
// plug is held now; the lines leave it as Slot returns.
func Slot(dev string, opportunities, frame int, blocked bool, limit int) (lines [][]string, nowBlocked bool) {
	if opportunities == 0 {
		if blocked {
			return nil, true
		}
		return [][]string{{"qdisc", "change", "dev", dev, "parent", "10:1", "handle", plugHandle, "plug", "block"}}, true
	}
	// half a frame over the opportunities' frames: a bucket of exactly one
	// frame passed no full-size packet (a slow recorded upload, one
	// opportunity a slot, carried nothing), and half is no further packet
	burst := opportunities*frame + frame/2
	lines = [][]string{{"qdisc", "change", "dev", dev, "parent", "1:1", "handle", "10:", "tbf",
		"rate", trickle(burst), "burst", fmt.Sprint(burst), "limit", fmt.Sprint(limit)}}
	if blocked {
		lines = append(lines, []string{"qdisc", "change", "dev", dev, "parent", "10:1", "handle", plugHandle, "plug", "release_indefinite"})
	}
	return lines, false
}
