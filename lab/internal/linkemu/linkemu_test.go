package linkemu

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

func TestBatch(t *testing.T) {
	cable := &profile.Profile{Down: 40000, Up: 8000, RTTms: 20, BufferMs: 500, Overhead: 18, LinkLayer: "ethernet"}
	vdsl := &profile.Profile{Down: 30000, Up: 10000, RTTms: 15, BufferMs: 300, Overhead: 34, LinkLayer: "ptm",
		Encap: profile.Encap{PPPoE: true, VLAN: 7}}
	adsl := &profile.Profile{Down: 8000, Up: 1000, RTTms: 30, BufferMs: 800, Overhead: 32, LinkLayer: "atm"}
	boost := *cable
	boost.BoostMB, boost.BoostPct = 20, 120
	tests := []struct {
		name string
		p    *profile.Profile
		d    config.Direction
		want []string
	}{
		{"cable down", cable, config.Download, []string{
			"qdisc replace dev m root handle 1: stab overhead 4 linklayer ethernet mpu 64 netem delay 10000us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 40000kbit burst 50000 limit 2500000",
		}},
		{"cable up", cable, config.Upload, []string{
			"qdisc replace dev m root handle 1: stab overhead 4 linklayer ethernet mpu 64 netem delay 10000us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 8000kbit burst 10000 limit 500000",
		}},
		// PPPoE headers ride in skb->len on the router-facing device only
		// (the VLAN tag stays in skb metadata until after the qdisc).
		{"vdsl down", vdsl, config.Download, []string{
			"qdisc replace dev m root handle 1: stab overhead 12 linklayer ethernet mpu 64 netem delay 7500us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 29538kbit burst 36920 limit 1107600",
		}},
		{"vdsl up", vdsl, config.Upload, []string{
			"qdisc replace dev m root handle 1: stab overhead 20 linklayer ethernet mpu 64 netem delay 7500us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 9846kbit burst 12300 limit 369000",
		}},
		// the boost is the download's: a 20 MB bucket drained at 48 Mbit/s
		{"cable-boost down", &boost, config.Download, []string{
			"qdisc replace dev m root handle 1: stab overhead 4 linklayer ethernet mpu 64 netem delay 10000us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 40000kbit burst 20000000 peakrate 48000kbit mtu 60000 limit 2500000",
		}},
		{"cable-boost up: none", &boost, config.Upload, []string{
			"qdisc replace dev m root handle 1: stab overhead 4 linklayer ethernet mpu 64 netem delay 10000us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 8000kbit burst 10000 limit 500000",
		}},
		{"adsl up: floor on limit", adsl, config.Upload, []string{
			"qdisc replace dev m root handle 1: stab overhead 18 linklayer atm netem delay 15000us limit 100000",
			"qdisc replace dev m parent 1:1 handle 10: tbf rate 1000kbit burst 4000 limit 100000",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Batch(tt.p, "m", tt.d); !slices.Equal(got, tt.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// A trace's rate change keeps the buffer's bytes (the profile's rate is the
// trace's highest) and sizes the burst for the new rate.
func TestChange(t *testing.T) {
	p := &profile.Profile{Down: 60000, Up: 15000, BufferMs: 500}
	got := strings.Join(Change(p, "m0", config.Download, 5000), " ")
	if want := "qdisc change dev m0 parent 1:1 handle 10: tbf rate 5000kbit burst 6250 limit 3750000"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = strings.Join(Change(p, "m1", config.Upload, 15000), " ")
	if want := "qdisc change dev m1 parent 1:1 handle 10: tbf rate 15000kbit burst 18750 limit 937500"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestSlot: a slot's tbf bucket is its opportunities' frames and half of
// one more at a trickle of a rate; an outage blocks the plug once, and the next slot with an
// opportunity opens it again.
func TestSlot(t *testing.T) {
	lines, blocked := Slot("m0", 3, 1518, false, 1000000)
	if blocked || len(lines) != 1 || strings.Join(lines[0], " ") != "qdisc change dev m0 parent 1:1 handle 10: tbf rate 432bit burst 5313 limit 1000000" {
		t.Errorf("a slot of 3: %q %v", lines, blocked)
	}
	// tc times a bucket in 64 ns ticks in 32 bits: at its rate, the bucket
	// must take under 274 s (a slot of 19 at 8 bit/s was out of range)
	for _, n := range []int{1, 19, 100, 1000} {
		lines, _ := Slot("m0", n, 1518, false, 1000000)
		var rate, burst int
		fmt.Sscanf(lines[0][10], "%dbit", &rate)
		fmt.Sscanf(lines[0][12], "%d", &burst)
		if secs := float64(burst) / (float64(rate) / 8); rate == 0 || secs > 200 || float64(rate)/8*0.01 > float64(burst)/100 {
			t.Errorf("a slot of %d: rate %d bit/s, burst %d: %.0f s of bucket", n, rate, burst, secs)
		}
	}
	lines, blocked = Slot("m0", 0, 1518, false, 1000000)
	if !blocked || len(lines) != 1 || !strings.HasSuffix(strings.Join(lines[0], " "), "plug block") {
		t.Errorf("an outage: %q %v", lines, blocked)
	}
	if lines, blocked = Slot("m0", 0, 1518, true, 1000000); !blocked || len(lines) != 0 {
		t.Errorf("an outage that goes on: %q %v", lines, blocked)
	}
	lines, blocked = Slot("m0", 1, 1518, true, 1000000)
	if blocked || len(lines) != 2 || !strings.HasSuffix(strings.Join(lines[1], " "), "plug release_indefinite") {
		t.Errorf("the end of an outage: %q %v", lines, blocked)
	}
	if f := Frame(&profile.Profile{Overhead: 18}); f != 1518 {
		t.Errorf("frame %d", f)
	}
	if f := Frame(&profile.Profile{Overhead: 32, LinkLayer: "atm"}); f != 32*53 {
		t.Errorf("an ATM frame %d, want 32 cells", f)
	}
}
