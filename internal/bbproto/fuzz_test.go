package bbproto

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Each fuzz target checks the property that matters for a server on the
// internet: no panic, and anything accepted survives a round trip.

func FuzzProbe(f *testing.F) {
	b := make([]byte, ProbeDefaultSize)
	(&Probe{Seq: 7, ClientSend: 1}).Marshal(b)
	f.Add(b)
	f.Add(b[:ProbeMinSize])
	f.Add([]byte("SQMP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProbe(b)
		if err != nil {
			return
		}
		if len(b) < ProbeMinSize || len(b) > ProbeMaxSize {
			t.Fatalf("accepted %d bytes", len(b))
		}
		out := make([]byte, len(b))
		if err := p.Marshal(out); err != nil {
			t.Fatal(err)
		}
		q, err := ParseProbe(out)
		if err != nil || q != p {
			t.Fatalf("round trip: %+v %v, want %+v", q, err, p)
		}
	})
}

func FuzzHello(f *testing.F) {
	good, _ := json.Marshal(Hello{Version: Version, Token: "x", Duration: 1e9, Streams: 4, ProbeInterval: 1e7})
	f.Add(good)
	f.Add([]byte(`{"version":1,"duration_ns":-1}`))
	f.Add([]byte(`{"version":1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHello(b)
		if err != nil {
			return
		}
		if h.Streams < 0 || h.Streams > MaxStreams || h.Duration <= 0 || h.ProbeInterval < MinProbeInterval {
			t.Fatalf("accepted out-of-range hello %+v", h)
		}
		if s := h.ProbeSlots(); s <= 0 || s > MaxProbes {
			t.Fatalf("ProbeSlots %d out of range", s)
		}
	})
}

func FuzzReadMsg(f *testing.F) {
	var buf bytes.Buffer
	WriteMsg(&buf, MsgReport, Report{Received: []byte{1, 2}, BytesSent: 3})
	f.Add(buf.Bytes())
	f.Add([]byte{1, 0xff, 0xff})
	f.Add([]byte{5, 0xff, 0xff, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, body, err := ReadMsg(bytes.NewReader(b))
		if err != nil {
			return
		}
		if typ < MsgHello || typ > MsgReport || len(body) > MaxMsgSize {
			t.Fatalf("accepted type %d with %d bytes", typ, len(body))
		}
		var r Report
		Decode(body, &r)
	})
}

func FuzzStreamHeader(f *testing.F) {
	h := StreamHeader{Kind: Download, Session: SessionID{1}}.Marshal()
	f.Add(h[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseStreamHeader(b)
		if err != nil {
			return
		}
		// Only the two reserved bytes may differ.
		want := bytes.Clone(b)
		want[6], want[7] = 0, 0
		if out := h.Marshal(); !bytes.Equal(out[:], want) {
			t.Fatalf("round trip: %x → %x", b, out)
		}
	})
}

func FuzzFrameHeader(f *testing.F) {
	f.Add([]byte{1, 0, 0x40, 0})
	f.Add([]byte{2, 0, 0, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < FrameHeaderSize {
			return
		}
		typ, n, err := ParseFrameHeader(b)
		if err != nil {
			return
		}
		if n <= 0 || n > MaxDataFrame || (typ != FrameData && n != 8) {
			t.Fatalf("accepted type %d length %d", typ, n)
		}
	})
}
