package bbproto

import (
	"errors"
	"fmt"
)

// Probe layout (big endian), request and reply alike:
//
//	0  magic "SQMP"
//	4  version, kind (1 request, 2 reply), 2 bytes zero
//	8  session id
//	16 sequence number (uint32), 4 bytes zero
//	24 client send time, ns (client clock)
//	32 server receive time, ns (server wall clock; 0 in a request)
//	40 server send time, ns (0 in a request)
//	48 padding up to the request's size
//
// The server turns a request into its reply in place and sends exactly as
// many bytes as it received, so a reply can never be larger than a request.
const (
	ProbeMinSize     = 48
	ProbeDefaultSize = 64 // like a small VoIP/game packet
	ProbeMaxSize     = 1472
)

var probeMagic = [4]byte{'S', 'Q', 'M', 'P'}

const (
	probeRequest = 1
	probeReply   = 2
)

// Probe is one decoded probe datagram.
type Probe struct {
	Reply      bool
	Session    SessionID
	Seq        uint32
	ClientSend int64
	ServerRecv int64
	ServerSend int64
}

// Marshal writes p into b, which must be ProbeMinSize..ProbeMaxSize bytes;
// the rest of b is zero padding.
func (p *Probe) Marshal(b []byte) error {
	if len(b) < ProbeMinSize || len(b) > ProbeMaxSize {
		return fmt.Errorf("probe size %d out of range %d..%d", len(b), ProbeMinSize, ProbeMaxSize)
	}
	clear(b)
	copy(b, probeMagic[:])
	b[4] = Version
	b[5] = probeRequest
	if p.Reply {
		b[5] = probeReply
	}
	copy(b[8:16], p.Session[:])
	be.PutUint32(b[16:], p.Seq)
	be.PutUint64(b[24:], uint64(p.ClientSend))
	be.PutUint64(b[32:], uint64(p.ServerRecv))
	be.PutUint64(b[40:], uint64(p.ServerSend))
	return nil
}

var (
	errProbeMagic = errors.New("probe: bad magic")
	errProbeKind  = errors.New("probe: unknown kind")
)

// ParseProbe decodes a datagram. It checks size, magic, version and kind;
// whether the session is live is the server's business.
func ParseProbe(b []byte) (Probe, error) {
	var p Probe
	if len(b) < ProbeMinSize || len(b) > ProbeMaxSize {
		return p, fmt.Errorf("probe: size %d out of range %d..%d", len(b), ProbeMinSize, ProbeMaxSize)
	}
	if [4]byte(b[:4]) != probeMagic {
		return p, errProbeMagic
	}
	if b[4] != Version {
		return p, fmt.Errorf("probe: version %d, want %d", b[4], Version)
	}
	switch b[5] {
	case probeRequest:
	case probeReply:
		p.Reply = true
	default:
		return p, errProbeKind
	}
	copy(p.Session[:], b[8:16])
	p.Seq = be.Uint32(b[16:])
	p.ClientSend = int64(be.Uint64(b[24:]))
	p.ServerRecv = int64(be.Uint64(b[32:]))
	p.ServerSend = int64(be.Uint64(b[40:]))
	return p, nil
}

// MakeReply turns a parsed request buffer into its reply in place; the
// caller sends b unchanged in length.
func MakeReply(b []byte, recv, send int64) {
	b[5] = probeReply
	be.PutUint64(b[32:], uint64(recv))
	be.PutUint64(b[40:], uint64(send))
}
