package bbproto

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestProbeRoundTrip(t *testing.T) {
	for _, size := range []int{ProbeMinSize, ProbeDefaultSize, ProbeMaxSize} {
		p := Probe{Session: SessionID{1, 2, 3, 4, 5, 6, 7, 8}, Seq: 0xdeadbeef, ClientSend: -5, ServerRecv: 1 << 62, ServerSend: 42}
		b := make([]byte, size)
		if err := p.Marshal(b); err != nil {
			t.Fatal(err)
		}
		got, err := ParseProbe(b)
		if err != nil || got != p {
			t.Fatalf("size %d: got %+v, %v; want %+v", size, got, err, p)
		}
		MakeReply(b, 7, 9)
		r, err := ParseProbe(b)
		want := p
		want.Reply, want.ServerRecv, want.ServerSend = true, 7, 9
		if err != nil || r != want {
			t.Fatalf("reply: got %+v, %v; want %+v", r, err, want)
		}
	}
}

func TestParseProbeRejects(t *testing.T) {
	good := make([]byte, ProbeDefaultSize)
	(&Probe{Seq: 1}).Marshal(good)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:ProbeMinSize-1],
		"oversized": make([]byte, ProbeMaxSize+1),
		"magic":     mut(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version":   mut(func(b []byte) []byte { b[4] = Version + 1; return b }),
		"kind":      mut(func(b []byte) []byte { b[5] = 9; return b }),
	} {
		if _, err := ParseProbe(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (&Probe{}).Marshal(make([]byte, ProbeMinSize-1)); err == nil {
		t.Error("Marshal into a too-small buffer succeeded")
	}
}

func TestControlRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := Hello{Version: Version, Token: "t", Duration: 40e9, Streams: 4, ProbeInterval: 10e6}
	if err := WriteMsg(&buf, MsgHello, h); err != nil {
		t.Fatal(err)
	}
	a := Accept{Session: SessionID{9, 8, 7, 6, 5, 4, 3, 2}, MaxDuration: 1, MaxBytes: 2, MaxStreams: 3}
	if err := WriteMsg(&buf, MsgAccept, a); err != nil {
		t.Fatal(err)
	}
	typ, body, err := ReadMsg(&buf)
	if err != nil || typ != MsgHello {
		t.Fatalf("ReadMsg: %v %v", typ, err)
	}
	if got, err := ParseHello(body); err != nil || got != h {
		t.Fatalf("ParseHello: %+v %v", got, err)
	}
	typ, body, err = ReadMsg(&buf)
	var got Accept
	if err != nil || typ != MsgAccept || Decode(body, &got) != nil || got != a {
		t.Fatalf("accept: %v %v %+v", typ, err, got)
	}
	if _, _, err := ReadMsg(&buf); err != io.EOF {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
}

func TestParseHelloRejects(t *testing.T) {
	ok := Hello{Version: Version, Duration: 1e9, Streams: 4, ProbeInterval: 10e6}
	for name, c := range map[string]struct {
		mod  func(*Hello)
		want string
	}{
		"version":  {func(h *Hello) { h.Version = 99 }, "version"},
		"duration": {func(h *Hello) { h.Duration = 0 }, "duration_ns"},
		"streams":  {func(h *Hello) { h.Streams = MaxStreams + 1 }, "streams"},
		"negative": {func(h *Hello) { h.Streams = -1 }, "streams"},
		"interval": {func(h *Hello) { h.ProbeInterval = 1 }, "probe_interval_ns"},
		"token":    {func(h *Hello) { h.Token = strings.Repeat("x", 257) }, "token"},
	} {
		h := ok
		c.mod(&h)
		b, _ := json.Marshal(h)
		if _, err := ParseHello(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}
	for _, body := range []string{`{"version":1,"bogus":1}`, `{"version":1} {}`, `[`, ``} {
		if _, err := ParseHello([]byte(body)); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
}

func TestReadMsgRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"type 0":         {0, 0, 2, '{', '}'},
		"type 99":        {99, 0, 2, '{', '}'},
		"short header":   {1, 0},
		"truncated body": {1, 0, 10, '{'},
	} {
		if _, _, err := ReadMsg(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestStreamHeader(t *testing.T) {
	h := StreamHeader{Kind: Upload, Session: SessionID{1}}
	b := h.Marshal()
	if got, err := ParseStreamHeader(b[:]); err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, f := range map[string]func(b []byte) []byte{
		"short":   func(b []byte) []byte { return b[:StreamHeaderSize-1] },
		"magic":   func(b []byte) []byte { b[1] = 0; return b },
		"version": func(b []byte) []byte { b[4] = 0; return b },
		"kind":    func(b []byte) []byte { b[5] = 3; return b },
	} {
		c := h.Marshal()
		if _, err := ParseStreamHeader(f(c[:])); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFrames(t *testing.T) {
	for _, c := range []struct {
		t  FrameType
		n  int
		ok bool
	}{
		{FrameData, 1, true}, {FrameData, MaxDataFrame, true}, {FrameData, 0, false}, {FrameData, MaxDataFrame + 1, false},
		{FramePing, 8, true}, {FramePong, 8, true}, {FrameCount, 8, true}, {FramePing, 9, false}, {0, 8, false}, {5, 8, false},
	} {
		var b [FrameHeaderSize]byte
		PutFrameHeader(b[:], c.t, c.n)
		typ, n, err := ParseFrameHeader(b[:])
		if (err == nil) != c.ok || (c.ok && (typ != c.t || n != c.n)) {
			t.Errorf("frame %d/%d: got %d/%d %v, ok want %v", c.t, c.n, typ, n, err, c.ok)
		}
	}
	f := Frame8(FramePong, 12345)
	var hdr [FrameHeaderSize]byte
	var p [8]byte
	r := bytes.NewReader(f[:])
	if typ, n, err := ReadFrameHeader(r, &hdr); err != nil || typ != FramePong || n != 8 {
		t.Fatalf("header: %v %v %v", typ, n, err)
	}
	if v, err := Read8(r, &p); err != nil || v != 12345 {
		t.Fatalf("payload: %v %v", v, err)
	}
	d := DataFrame()
	typ, n, err := ParseFrameHeader(d)
	if err != nil || typ != FrameData || n != DataPayload || len(d) != FrameHeaderSize+DataPayload {
		t.Fatalf("DataFrame: type %d, %d of %d bytes, %v", typ, n, len(d), err)
	}
}

func TestSessionIDText(t *testing.T) {
	id := SessionID{0xab, 1, 2, 3, 4, 5, 6, 0xff}
	b, _ := id.MarshalText()
	var got SessionID
	if err := got.UnmarshalText(b); err != nil || got != id {
		t.Fatalf("%s: %v %v", b, got, err)
	}
	for _, s := range []string{"", "ab", "zz0102030405060f", "ab0102030405060708"} {
		if err := got.UnmarshalText([]byte(s)); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for in, want := range map[string][2]string{
		"example.net":      {"example.net", "8693"},
		"example.net:9":    {"example.net", "9"},
		"192.0.2.1":        {"192.0.2.1", "8693"},
		"2001:db8::1":      {"2001:db8::1", "8693"},
		"[2001:db8::1]":    {"2001:db8::1", "8693"},
		"[2001:db8::1]:77": {"2001:db8::1", "77"},
	} {
		if h, p := SplitHostPort(in); h != want[0] || p != want[1] {
			t.Errorf("SplitHostPort(%q) = %q, %q", in, h, p)
		}
	}
}

// The largest report the protocol allows travels whole: MaxProbes bits of
// bitmap, every probe lost in a pattern nothing compresses.
func TestLargestReport(t *testing.T) {
	h := Hello{Version: Version, Duration: int64(450 * time.Second), ProbeInterval: MinProbeInterval}
	rep := Report{Received: make([]byte, (h.ProbeSlots()+7)/8), BytesSent: 1 << 40, BytesRecv: 1 << 40, Ended: EndedDuration}
	for i := range rep.Received {
		rep.Received[i] = 0x55
	}
	var buf bytes.Buffer
	if err := WriteMsg(&buf, MsgReport, rep); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 66000 {
		t.Fatalf("report of %d bytes does not exercise the long form", buf.Len())
	}
	typ, body, err := ReadMsg(&buf)
	var back Report
	if err == nil {
		err = Decode(body, &back)
	}
	if err != nil || typ != MsgReport || !bytes.Equal(back.Received, rep.Received) {
		t.Fatalf("read back: type %d, %v", typ, err)
	}
	// a small message keeps version 1's 3-byte header
	buf.Reset()
	WriteMsg(&buf, MsgRefuse, Refuse{Reason: "x"})
	if n := int(buf.Bytes()[1])<<8 | int(buf.Bytes()[2]); n != buf.Len()-3 {
		t.Errorf("small message header says %d bytes, body has %d", n, buf.Len()-3)
	}
	// a length over the limit is refused before the body is read
	if _, _, err := ReadMsg(bytes.NewReader([]byte{5, 0xff, 0xff, 0x7f, 0, 0, 0})); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversize length: %v", err)
	}
}

func TestCheckServer(t *testing.T) {
	for s, ok := range map[string]bool{
		"192.0.2.1": true, "192.0.2.1:5201": true, "[2001:db8::1]:1": true, "2001:db8::1": true, "host.example:65535": true,
		"192.0.2.1:99999": false, "192.0.2.1:0": false, "192.0.2.1:http": false, ":5201": false, "": false,
		// what a caller must never pass on as a flag, a path or markup
		"--json=/etc/passwd": false, "-h": false, "--config=/etc/shadow": false, "a/b": false, "<img src=x>": false,
		"host -x": false, "-host.example": false, "host.example.": true, "a_b.example": false,
	} {
		if err := CheckServer(s); (err == nil) != ok {
			t.Errorf("CheckServer(%q) = %v", s, err)
		}
	}
}

func TestCheckServerURL(t *testing.T) {
	for s, ok := range map[string]bool{
		"https://mensura.cdn-apple.com/api/v1/gm/config": true, "https://192.0.2.1:4443/config": true,
		"http://[2001:db8::1]:8080/config": true,
		"ftp://host.example/config":        false, "https:///config": false, "https://user@host.example/config": false,
		"https://-x.example/config": false, "https://host.example:0/config": false, "https://host.example/<b>": false,
		"--json=https://x": false, "https://host.example/a b": false, "https://host.example/a\"b": false, "https://[2001:db8::1]/c?x=1": true,
	} {
		if err := CheckServerURL(s); (err == nil) != ok {
			t.Errorf("CheckServerURL(%q) = %v", s, err)
		}
	}
}
