package tctest

import "testing"

// TestTCPPayload: the payload is what is left after the IPv4 and TCP
// headers as the packet gives their lengths, so a segment of one MSS sent
// with a SACK block (TestOneSegmentToResponsivenessServer's 1526-byte
// frame) still counts as one segment; a frame that is not IPv4 TCP counts
// as none.
func TestTCPPayload(t *testing.T) {
	frame := func(ethertype uint16, proto byte, ihl, doff, payload int) []byte {
		f := make([]byte, 14+ihl*4+doff*4+payload)
		f[12], f[13] = byte(ethertype>>8), byte(ethertype)
		f[14] = 4<<4 | byte(ihl)
		f[14+9] = proto
		f[14+ihl*4+12] = byte(doff) << 4
		return f
	}
	for _, tc := range []struct {
		name string
		f    []byte
		want int
	}{
		{"one MSS with timestamps", frame(0x0800, 6, 5, 8, 1448), 1448},
		{"one MSS with timestamps and a SACK block", frame(0x0800, 6, 5, 11, 1448), 1448},
		{"a GSO packet of two segments", frame(0x0800, 6, 5, 8, 2896), 2896},
		{"IP options", frame(0x0800, 6, 6, 5, 100), 100},
		{"UDP", frame(0x0800, 17, 5, 2, 1400), 0},
		{"IPv6", frame(0x86dd, 6, 5, 8, 1448), 0},
		{"truncated", frame(0x0800, 6, 5, 8, 0)[:40], 0},
	} {
		if got := tcpPayload(tc.f); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}
