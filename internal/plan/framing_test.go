package plan

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// The shaper rate one kbit/s of goodput needs is the frame the plan's
// shaper counts for a full-size segment's 1448 bytes of payload.
func TestRatePerGoodput(t *testing.T) {
	for _, tc := range []struct {
		name, opts string
		proto      string
		kind       string  // linkinfo.Facts.Kind of the shaped device
		want       float64 // bytes counted per 1448 of payload
		// ack: bytes of a 52-byte ACK the shaper does not count, in its
		// count's scale for full-size frames
		ack float64
	}{
		{"cake, Ethernet detected", "option qdisc 'cake'", "dhcp", "", 1518, 0},
		{"cake, PPPoE detected", "option qdisc 'cake'", "pppoe", "", 1528, 0},
		{"fq_codel, overhead set", "option qdisc 'fq_codel'\n\toption linklayer 'ethernet'\n\toption overhead '34'", "dhcp", "", 1534, 0},
		// 1500 + 18 bytes are 32 cells of 48 on ATM, each 53 on the wire
		{"cake on ATM", "option qdisc 'cake'\n\toption linklayer 'atm'", "dhcp", "", 32 * 53, 0},
		// nsstbl counts the frame on the port whatever sized its mtu: under
		// PPPoE the Ethernet header and PPPoE's 8 bytes; an ACK costs
		// 52 + 32 bytes on PPPoE as the plan models it for nss (its 4
		// bytes of NSS framing included), 84 × 1522/1532 in nsstbl's
		// scale, of which it counts 74
		{"nss under PPPoE", "option script 'nss-zk.qos'", "pppoe", "", 1522, 84.0*1522/1532 - 74},
		// on the PPP device itself it counts bare IP
		{"nss on the PPP device", "option script 'nss-zk.qos'", "pppoe", "ppp", 1500, 84.0*1500/1532 - 52},
		// cable's 18 bytes configured: 70 × 1514/1518 - 66, 3.8 bytes
		{"nss, overhead set", "option script 'nss-zk.qos'\n\toption linklayer 'ethernet'\n\toption overhead '18'", "dhcp", "", 1514, 70.0*1514/1518 - 66},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
			os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n\toption download '20000'\n\toption upload '10000'\n\t"+tc.opts+"\n"), 0o644)
			qs, err := config.Resolve(root, "", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			f := linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500, Kind: tc.kind, Proto: tc.proto, LowerDevice: "eth0"}
			if got, want := RatePerGoodput(qs[0], f), tc.want/1448; math.Abs(got-want) > 1e-9 {
				t.Errorf("%.4f, want %.4f (%.0f/1448)", got, want, tc.want)
			}
			if got, want := AckUncounted(qs[0], f), tc.ack/2/1448; math.Abs(got-want) > 1e-9 {
				t.Errorf("ACKs uncounted %.6f per kbit/s of goodput, want %.6f (%.1f bytes per two segments)", got, want, tc.ack)
			}
			// the largest packet on the link: a full frame, as the row's
			// count for a full-size segment where the plan compensates
			if tc.proto == "dhcp" && !strings.Contains(tc.opts, "nss") {
				if got := MaxPacketBits(qs[0], f); got != int(8*tc.want) {
					t.Errorf("largest packet %d bits, want %d", got, int(8*tc.want))
				}
			}
			// a 64-byte probe is a 92-byte IP packet, every 10 ms
			probe := 92 + tc.want - 1500
			if tc.name == "cake on ATM" {
				probe = 3 * 53 // 92 + 18 bytes in three cells
			}
			if got, want := ProbeKbit(qs[0], f, 92, 10*time.Millisecond), probe*8/1000/0.01; math.Abs(got-want) > 1e-9 {
				t.Errorf("probes %.1f kbit/s, want %.1f", got, want)
			}
		})
	}
}
