package plan

import (
	"math"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// The packet sizes the framing rules assume: a full-size IPv4 packet and
// its IPv4+TCP headers with timestamps. IPv6's header is 20 bytes longer,
// so the same goodput takes V6PerGoodput times the rate.
const (
	MTU            = 1500.0
	TCPIPHeader    = 52.0
	SegmentPayload = MTU - TCPIPHeader
	V6PerGoodput   = SegmentPayload / (SegmentPayload - 20)
)

// RatePerGoodput is the shaper rate one kbit/s of TCP goodput needs on q's
// link: goodput counts a full-size segment's payload, the shaper its whole
// frame (frameBytes), which on ATM is 17 % more (TestRatePerGoodput).
func RatePerGoodput(q config.Queue, f linkinfo.Facts) float64 {
	return frameBytes(q, f, MTU) / SegmentPayload
}

// ProbeKbit is the shaper rate one probe of ipBytes every interval takes:
// on a slow ATM link its framing is a tenth of the line, so a line measured
// by its streams' goodput alone would read low there.
func ProbeKbit(q config.Queue, f linkinfo.Facts, ipBytes int, interval time.Duration) float64 {
	if interval <= 0 {
		return 0
	}
	return frameBytes(q, f, float64(ipBytes)) * 8 / 1000 / interval.Seconds()
}

// frameBytes is what q's shaper counts for an IP packet of ipLen bytes:
// the link's cost where the plan compensates the overhead; nsstbl counts
// the frame on the device it shapes, whatever overhead sized its mtu.
func frameBytes(q config.Queue, f linkinfo.Facts, ipLen float64) float64 {
	if q.Backend == config.NSS {
		return ipLen + nssHeader(f)
	}
	return wireBytes(q, f, ipLen)
}

// nssHeader is the part of a packet's framing nsstbl counts (docs/design.md,
// "NSS shapers belong on the physical port"): none on a PPP device; on an
// Ethernet port its 14-byte header, under PPPoE 8 more inside the frame. A
// VLAN tag rides in the packet's metadata, outside the count.
func nssHeader(f linkinfo.Facts) float64 {
	switch {
	case f.Kind == "ppp":
		return 0
	case f.Proto == "pppoe":
		return 14 + 8
	}
	return 14
}

// MaxPacketBits is the largest packet's cost on q's link, in bits: one such
// packet ahead of a probe delays it by MaxPacketBits / rate, a delay no
// queue holds (autorate's thresholds add it; internal/autorate, Params).
func MaxPacketBits(q config.Queue, f linkinfo.Facts) int {
	return int(8 * wireBytes(q, f, float64(f.MTU)))
}

// wireBytes is what an IP packet of ipLen bytes costs on q's link as the
// plan models it: the packet and its overhead, at least the minimum frame
// (mpu), padded into 53-byte cells of 48 on ATM.
func wireBytes(q config.Queue, f linkinfo.Facts, ipLen float64) float64 {
	over, least := 14.0, 0.0
	if p, err := Build(q, f); err == nil && len(p.Dirs) > 0 {
		over, least = float64(p.Dirs[0].Overhead), float64(p.Dirs[0].MPU)
	}
	frame := max(ipLen+over, least)
	if q.LinkLayer == config.LinkATM {
		frame = math.Ceil(frame/48) * 53
	}
	return frame
}

// AckUncounted is the shaper rate a direction's count misses per kbit/s of
// the other direction's goodput: its ACKs (one per two full-size segments)
// cost more on the link, relative to a full-size frame, than the shaper
// counts. 0 where the plan compensates the overhead; nsstbl's count fits
// full-size frames and undercounts small ones (TestRatePerGoodput).
func AckUncounted(q config.Queue, f linkinfo.Facts) float64 {
	if q.Backend != config.NSS {
		return 0
	}
	scaled := wireBytes(q, f, TCPIPHeader) * frameBytes(q, f, MTU) / wireBytes(q, f, MTU)
	return max(0, scaled-frameBytes(q, f, TCPIPHeader)) / (2 * SegmentPayload)
}
