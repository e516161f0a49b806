package bbproto

import (
	"fmt"
	"io"
)

// StreamKind says which way a data stream's bulk data flows.
type StreamKind uint8

// Stream kinds, named from the client's side.
const (
	Download StreamKind = 1 // server sends bulk data
	Upload   StreamKind = 2 // client sends bulk data
)

func (k StreamKind) String() string {
	switch k {
	case Download:
		return "download"
	case Upload:
		return "upload"
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// StreamHeader opens a data stream: magic "SQMD", version, kind, 2 zero
// bytes, session id.
type StreamHeader struct {
	Kind    StreamKind
	Session SessionID
}

// StreamHeaderSize is the fixed size of a marshalled StreamHeader.
const StreamHeaderSize = 16

var streamMagic = [4]byte{'S', 'Q', 'M', 'D'}

// Marshal returns the header's wire form.
func (h StreamHeader) Marshal() [StreamHeaderSize]byte {
	var b [StreamHeaderSize]byte
	copy(b[:], streamMagic[:])
	b[4] = Version
	b[5] = byte(h.Kind)
	copy(b[8:], h.Session[:])
	return b
}

// ParseStreamHeader decodes and checks a stream header.
func ParseStreamHeader(b []byte) (StreamHeader, error) {
	var h StreamHeader
	if len(b) != StreamHeaderSize {
		return h, fmt.Errorf("stream header: %d bytes, want %d", len(b), StreamHeaderSize)
	}
	if [4]byte(b[:4]) != streamMagic {
		return h, fmt.Errorf("stream header: bad magic")
	}
	if b[4] != Version {
		return h, fmt.Errorf("stream header: version %d, want %d", b[4], Version)
	}
	h.Kind = StreamKind(b[5])
	if h.Kind != Download && h.Kind != Upload {
		return h, fmt.Errorf("stream header: unknown kind %d", b[5])
	}
	copy(h.Session[:], b[8:])
	return h, nil
}

// FrameType tags a frame inside a data stream.
type FrameType uint8

// Frame types. Data is bulk payload (all zeros; only its length matters).
// Ping carries 8 bytes the client chose (its send time); the peer echoes them
// in a Pong queued behind whatever it is already sending on that stream, so
// the round trip includes the stream's own queue. Count (server → client on
// upload streams) carries the payload bytes the server has received so far,
// so upload goodput is measured at the receiver, as iperf3 does.
const (
	FrameData  FrameType = 1
	FramePing  FrameType = 2
	FramePong  FrameType = 3
	FrameCount FrameType = 4
)

// FrameHeaderSize is type (1 byte) + payload length (3 bytes).
const FrameHeaderSize = 4

// MaxDataFrame bounds a data frame's payload.
const MaxDataFrame = 1 << 20

// PutFrameHeader writes a frame header into b[:FrameHeaderSize].
func PutFrameHeader(b []byte, t FrameType, n int) {
	b[0] = byte(t)
	b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n)
}

// ParseFrameHeader checks a frame header: known type and a length that type
// allows (8 for control frames, 1..MaxDataFrame for data).
func ParseFrameHeader(b []byte) (FrameType, int, error) {
	t := FrameType(b[0])
	n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
	switch t {
	case FrameData:
		if n == 0 || n > MaxDataFrame {
			return 0, 0, fmt.Errorf("data frame of %d bytes (limit %d)", n, MaxDataFrame)
		}
	case FramePing, FramePong, FrameCount:
		if n != 8 {
			return 0, 0, fmt.Errorf("frame type %d with %d bytes, want 8", t, n)
		}
	default:
		return 0, 0, fmt.Errorf("unknown frame type %d", t)
	}
	return t, n, nil
}

// ReadFrameHeader reads and checks one frame header, using hdr as scratch
// so steady-state reading does not allocate.
func ReadFrameHeader(r io.Reader, hdr *[FrameHeaderSize]byte) (FrameType, int, error) {
	if err := readFull(r, hdr[:], "frame header"); err != nil {
		return 0, 0, err
	}
	return ParseFrameHeader(hdr[:])
}

// Frame8 builds a control frame carrying v (ping, pong, count).
func Frame8(t FrameType, v uint64) [FrameHeaderSize + 8]byte {
	var b [FrameHeaderSize + 8]byte
	PutFrameHeader(b[:], t, 8)
	be.PutUint64(b[FrameHeaderSize:], v)
	return b
}

// Read8 reads the 8-byte payload of a ping, pong or count frame.
func Read8(r io.Reader, scratch *[8]byte) (uint64, error) {
	if err := readFull(r, scratch[:], "frame payload"); err != nil {
		return 0, err
	}
	return be.Uint64(scratch[:]), nil
}

// DataPayload is the size of the data frames both ends send. A ping or pong
// queued behind bulk data waits for at most one frame in user space (plus
// the socket's unsent bytes, see sockopt.BulkLowat), so frames stay small; 16 KB
// still moves tens of Gbit/s per core.
const DataPayload = 16 << 10

// DataFrame returns one data frame of DataPayload zero bytes. It is never
// modified, so all senders can share one.
func DataFrame() []byte {
	b := make([]byte, FrameHeaderSize+DataPayload)
	PutFrameHeader(b, FrameData, DataPayload)
	return b
}
