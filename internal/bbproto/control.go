package bbproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// MsgType tags a control message.
type MsgType uint8

// Control message types, in the order a test sends them.
const (
	MsgHello  MsgType = 1 // client → server
	MsgAccept MsgType = 2 // server → client
	MsgRefuse MsgType = 3 // server → client, then the server closes
	MsgDone   MsgType = 4 // client → server: load and probes finished
	MsgReport MsgType = 5 // server → client: what the server saw
)

// MaxMsgSize bounds a control message's body. The largest thing that
// travels is a Report's probe bitmap: MaxProbes bits are 50000 bytes, 66668
// in JSON's base64, so a 16-bit length could not carry the reports the
// protocol promises (protocol version 1 lost 450 s tests at 1 ms probes).
const MaxMsgSize = 128 << 10

// Limits the protocol itself imposes, whatever a server allows.
const (
	MaxStreams       = 64      // TCP streams per direction
	MinProbeInterval = 1000000 // ns; faster probing measures the prober
	// MaxProbes bounds the server's per-session bitmap of received probe
	// sequence numbers: 1 ms probes for 400 s, or 10 ms probes for 66 min.
	MaxProbes = 400000
)

// Hello opens a test.
type Hello struct {
	Version  int    `json:"version"`
	Token    string `json:"token,omitempty"`
	Duration int64  `json:"duration_ns"` // whole test including idle phases
	Streams  int    `json:"streams"`     // per direction
	// ProbeInterval lets the server size the probe bitmap.
	ProbeInterval int64 `json:"probe_interval_ns"`
}

// Accept answers a valid Hello. Limits are the server's, so a client can say
// why a long test was refused before asking.
type Accept struct {
	Session     SessionID `json:"session"`
	MaxDuration int64     `json:"max_duration_ns"`
	MaxBytes    int64     `json:"max_bytes"`
	MaxStreams  int       `json:"max_streams"`
}

// Refuse says why the server will not run a test.
type Refuse struct {
	Reason string `json:"reason"`
}

// Done ends the test.
type Done struct{}

// Report is what the server measured: which probe sequence numbers arrived
// (bit i of Received is seq i) and the payload bytes it moved.
type Report struct {
	Received  []byte `json:"received"`
	BytesSent int64  `json:"bytes_sent"`
	BytesRecv int64  `json:"bytes_received"`
	// Ended is set when the server cut the test short (EndedBudget,
	// EndedDuration), so the client can say so instead of reporting a slow
	// link.
	Ended string `json:"ended,omitempty"`
}

// Why a server cut a test short, as Report.Ended states it.
const (
	EndedBudget   = "byte budget used up"
	EndedDuration = "duration limit reached"
)

// longBody, as a message's 16-bit length, says a 32-bit length follows.
// Small messages keep version 1's framing, so a server and a client of
// different versions still read each other's Hello and Refuse and can say
// "use the same sqmkit version on both ends".
const longBody = 0xffff

// WriteMsg writes one message: type (1 byte), length (2 bytes, or longBody
// and 4 bytes), JSON body.
func WriteMsg(w io.Writer, t MsgType, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > MaxMsgSize {
		return fmt.Errorf("control message %d: %d bytes, limit %d", t, len(body), MaxMsgSize)
	}
	b := make([]byte, 3, 7+len(body))
	b[0] = byte(t)
	if len(body) < longBody {
		be.PutUint16(b[1:], uint16(len(body)))
	} else {
		be.PutUint16(b[1:], longBody)
		b = be.AppendUint32(b, uint32(len(body)))
	}
	_, err = w.Write(append(b, body...))
	return err
}

// ReadMsg reads one message's type and JSON body; a body over MaxMsgSize is
// refused before any of it is read.
func ReadMsg(r io.Reader) (MsgType, []byte, error) {
	var h [3]byte
	if err := readFull(r, h[:], "control header"); err != nil {
		return 0, nil, err
	}
	t := MsgType(h[0])
	if t < MsgHello || t > MsgReport {
		return 0, nil, fmt.Errorf("control message type %d unknown", t)
	}
	n := uint32(be.Uint16(h[1:]))
	if n == longBody {
		var l [4]byte
		if err := readFull(r, l[:], "control length"); err != nil {
			return 0, nil, err
		}
		n = be.Uint32(l[:])
	}
	if n > MaxMsgSize {
		return 0, nil, fmt.Errorf("control message %d: %d bytes, limit %d", t, n, MaxMsgSize)
	}
	body := make([]byte, n)
	if err := readFull(r, body, "control body"); err != nil {
		return 0, nil, err
	}
	return t, body, nil
}

// Decode unmarshals a message body strictly: unknown fields are an error, so
// a version mismatch shows up as a clear refusal rather than zero values.
func Decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("decoding %T: %w", v, err)
	}
	if d.More() {
		return fmt.Errorf("decoding %T: trailing data", v)
	}
	return nil
}

// ParseHello decodes and checks a Hello's fields against the protocol's
// limits (the server applies its own, tighter ones afterwards).
func ParseHello(body []byte) (Hello, error) {
	var h Hello
	if err := Decode(body, &h); err != nil {
		return h, err
	}
	switch {
	case h.Version != Version:
		return h, fmt.Errorf("hello: version %d, this server speaks %d; use the same sqmkit version on both ends", h.Version, Version)
	case h.Duration <= 0:
		return h, fmt.Errorf("hello: duration_ns %d must be positive", h.Duration)
	case h.Streams < 0 || h.Streams > MaxStreams:
		return h, fmt.Errorf("hello: streams %d out of range 0..%d", h.Streams, MaxStreams)
	case h.ProbeInterval < MinProbeInterval:
		return h, fmt.Errorf("hello: probe_interval_ns %d below %d", h.ProbeInterval, MinProbeInterval)
	case len(h.Token) > 256:
		return h, fmt.Errorf("hello: token longer than 256 bytes")
	}
	return h, nil
}

// ProbeSlots is how many probe sequence numbers a test of this Hello can
// send, with slack for scheduling jitter, capped at MaxProbes.
func (h Hello) ProbeSlots() int {
	n := h.Duration/h.ProbeInterval + 1000
	if n > MaxProbes {
		return MaxProbes
	}
	return int(n)
}
