package sockopt

import (
	"cmp"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SetNotSentLowat sets TCP_NOTSENT_LOWAT to bytes on c, when c is a TCP
// connection. Failure only costs some self-inflicted latency, so it is
// ignored.
func SetNotSentLowat(c net.Conn, bytes int) {
	if rc, ok := rawConn(c); ok {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, bytes)
		})
	}
}

// replenished is a TCP connection whose TCP_NOTSENT_LOWAT follows its
// throughput (Replenish). A fixed mark is the wrong size at every rate but
// one: 32 KB is 0.3 ms at 1 Gbit/s but 200 ms on each of sixteen
// connections sharing 20 Mbit/s, where a request multiplexed onto one waits
// behind its own connection's backlog (TestReplenishFollowsRate).
type replenished struct {
	*net.TCPConn
	next     atomic.Int64 // unix nanoseconds of the next update
	lowat    atomic.Int64 // the mark last set
	mss      atomic.Int64 // the segment size last read
	segments bool         // writes go one segment per packet (Segmented)
}

// replenishEvery bounds the cost: the kernel's rate is read at most this
// often, however many writes the connection makes.
const replenishEvery = 10 * time.Millisecond

func (r *replenished) Write(b []byte) (int, error) {
	if now := time.Now().UnixNano(); now >= r.next.Load() {
		r.next.Store(now + int64(replenishEvery))
		r.update()
	}
	return writeEnded(r.TCPConn, b, r.segments)
}

// Replenish returns c, when it is a TCP connection, with its unsent
// backlog kept to ReplenishTime of its throughput, as the responsiveness
// draft asks of both ends of a test. Its writes end their buffers
// (writeEnded): the kernel checks the mark only where a write starts one.
// The rate is the kernel's delivery rate (which a sample limited by the
// application only ever raises, so a small mark cannot talk itself
// smaller), or before its first sample what the congestion window allows
// per round trip.
func Replenish(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	r := &replenished{TCPConn: tc}
	r.update()
	return r
}

// Unsent is what c, a connection from Replenish, may now hold unsent: the
// size a writer's own chunks should keep to, so that what queues in it
// ahead of the socket waits no longer than what queues in the socket. It
// is whole segments, at least one: each write ends its buffer
// (writeEnded), and a chunk that is not whole segments sends a runt packet
// behind it, which costs a cell-based line most (TestUnsentWholeSegments).
func Unsent(c net.Conn) (int, bool) {
	r, ok := c.(*replenished)
	if !ok {
		return 0, false
	}
	mark, mss := r.lowat.Load(), r.mss.Load()
	if mss > 0 {
		mark = max(mss, mark/mss*mss)
	}
	return int(mark), r.lowat.Load() > 0
}

// update sets the mark from the kernel's view of the connection.
func (r *replenished) update() {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		r.mss.Store(int64(info.Snd_mss))
		rate := float64(info.Delivery_rate)
		if rate == 0 && info.Rtt > 0 {
			rate = float64(info.Snd_cwnd) * float64(info.Snd_mss) / (float64(info.Rtt) / 1e6)
		}
		if lowat := replenishLowat(rate); int64(lowat) != r.lowat.Load() {
			if unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, lowat) == nil {
				r.lowat.Store(int64(lowat))
			}
		}
	})
}

// BytesAcked is the number of bytes the peer acknowledged on c (TCP_INFO).
func BytesAcked(c net.Conn) (int64, bool) {
	acked, _, ok := TCPCounts(c)
	return acked, ok
}

// TCPCounts are the bytes the peer acknowledged and the bytes received on
// c, as the kernel counts them (TCP_INFO): when they moved, however late
// the process reads or learns of them.
func TCPCounts(c net.Conn) (acked, received int64, ok bool) {
	info, ok := tcpInfoOf(c)
	if !ok {
		return 0, 0, false
	}
	return int64(info.Bytes_acked), int64(info.Bytes_received), true
}

// tcpInfoOf is the kernel's TCP_INFO of c, when c is a TCP connection.
func tcpInfoOf(c net.Conn) (*unix.TCPInfo, bool) {
	rc, ok := rawConn(c)
	if !ok {
		return nil, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return nil, false
	}
	return info, true
}

// HandshakeRTT is c's TCP handshake as the kernel timed it, read right
// after the dial: the SYN sent to the SYN-ACK taken in (TCP_INFO's one
// sample then), without the wait of a busy process for its CPU after the
// kernel had the answer, as RxStamp is for a datagram. measured, the
// dialer's own time, stands where the kernel has no clean sample: a SYN
// sent again (its wait is the path's) or no TCP_INFO (TestHandshakeRTT).
func HandshakeRTT(c net.Conn, measured time.Duration) time.Duration {
	info, ok := tcpInfoOf(c)
	if !ok || info.Rtt == 0 || info.Total_retrans > 0 {
		return measured
	}
	return min(measured, time.Duration(info.Rtt)*time.Microsecond)
}

// RxStampSpace is the control-message buffer a read needs for RxStamp.
var RxStampSpace = syscall.CmsgSpace(16)

// StampReceives asks the kernel to stamp every datagram c receives with
// the time it arrived (SO_TIMESTAMPNS), which ReadStamped returns. A probe
// read by a busy process then still carries the network's delay, not the
// process's wait for a CPU (ping and irtt stamp the same way).
func StampReceives(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// RxStamp is the kernel's receive time in a datagram's control messages
// (SCM_TIMESTAMPNS): a timespec of two 64-bit words, or of two 32-bit
// words on the 32-bit routers (arm, mipsle), in the machine's byte order.
func RxStamp(oob []byte) (time.Time, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_TIMESTAMPNS {
			continue
		}
		switch len(m.Data) {
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:]))), true
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(m.Data))), int64(int32(binary.NativeEndian.Uint32(m.Data[4:])))), true
		}
	}
	return time.Time{}, false
}

// WriteSegments writes b to c one TCP segment per packet: each sendmsg
// carries at most one MSS and ends its record (MSG_EOR), so the kernel
// neither appends the next write to it nor sends it with another as one
// GSO packet. A host's own TCP otherwise hands its qdisc two segments at
// once on a slow line (its smallest TSO size), which a shaper with a
// two-packet burst lets out back to back, where a router forwards its
// clients' packets one by one. It returns the bytes written, and
// errors.ErrUnsupported, having written nothing, when c is not a TCP
// connection with a segment size.
func WriteSegments(c net.Conn, b []byte) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, errors.ErrUnsupported
	}
	return sendEnded(tc, b, func(fd int) (int, error) {
		mss, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
		if err != nil || mss <= 0 {
			return 0, cmp.Or(err, errors.ErrUnsupported)
		}
		return mss, nil
	})
}

// writeEnded writes all of b as a Write does, each sendmsg ending its
// buffer (MSG_EOR), one segment long when segments is set and the socket
// gives its size. The kernel checks TCP_NOTSENT_LOWAT only where a write
// starts a buffer: one appended to an unsent buffer goes in unchecked, and
// GSO lets that buffer grow to 64 kB, a second of a slow connection's
// upload ahead of a request multiplexed behind it (TestReplenishHoldsMark;
// the lab's reference server comparison saw it, docs/results.md). Ended,
// every write is checked.
func writeEnded(tc *net.TCPConn, b []byte, segments bool) (int, error) {
	return sendEnded(tc, b, func(fd int) (int, error) {
		if segments {
			if mss, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil && mss > 0 {
				return mss, nil
			}
		}
		return len(b), nil
	})
}

// sendEnded writes b in sendmsg calls of at most size(fd) bytes, each
// ending its buffer (MSG_EOR), waiting for room as a Write does; it
// returns the bytes written and size's error, if any.
func sendEnded(tc *net.TCPConn, b []byte, size func(fd int) (int, error)) (int, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		chunk, err := size(int(fd))
		if err != nil {
			werr = err
			return true
		}
		for n < len(b) {
			sent, err := unix.SendmsgN(int(fd), b[n:n+min(chunk, len(b)-n)], nil, nil, unix.MSG_EOR|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
			if err == unix.EAGAIN {
				return false
			}
			if err != nil {
				werr = err
				return true
			}
			n += sent
		}
		return true
	}); err != nil {
		return n, err
	}
	return n, werr
}

// Segmented returns c writing one TCP segment per packet (WriteSegments)
// for a writer above it that cannot ask for that itself: TLS, whose
// records the kernel otherwise sends as multi-segment GSO packets. c may
// be a TCP connection or one from Replenish, before its first write;
// anything else is returned as it is (TestWriteSegments).
func Segmented(c net.Conn) net.Conn {
	switch c := c.(type) {
	case *replenished:
		c.segments = true
		return c
	case *net.TCPConn:
		return &segmented{c}
	}
	return c
}

// segmented is a TCP connection from Segmented.
type segmented struct{ *net.TCPConn }

func (s *segmented) Write(b []byte) (int, error) { return writeEnded(s.TCPConn, b, true) }

// rawConn is what the options act on: a TCP connection's file descriptor.
func rawConn(c net.Conn) (interface{ Control(func(uintptr)) error }, bool) {
	switch w := c.(type) {
	case *replenished:
		c = w.TCPConn
	case *segmented:
		c = w.TCPConn
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil, false
	}
	rc, err := tc.SyscallConn()
	return rc, err == nil
}
