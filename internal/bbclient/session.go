package bbclient

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
)

// Session is a test the server accepted: its control connection (on which
// the server speaks once more, with its report) and the address its UDP
// probes answer on.
type Session struct {
	Ctl    net.Conn
	ID     bbproto.SessionID
	Addr   netip.AddrPort
	Accept bbproto.Accept
}

// Open dials server ("tcp", "tcp4" or "tcp6"; "" is "tcp") and asks for a
// session; a test (Run) and autorate's probe-only sessions (streams 0)
// open theirs this way.
func Open(ctx context.Context, server, network string, hello bbproto.Hello) (*Session, error) {
	host, port := bbproto.SplitHostPort(server)
	if network == "" {
		network = "tcp"
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ctl, err := d.DialContext(dctx, network, net.JoinHostPort(host, port))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w%s", server, err, dialHint(err, host, port, network))
	}
	ss, err := handshake(ctl, hello)
	if err != nil {
		ctl.Close()
		return nil, err
	}
	return ss, nil
}

func handshake(ctl net.Conn, hello bbproto.Hello) (*Session, error) {
	ap := ctl.RemoteAddr().(*net.TCPAddr).AddrPort()
	ss := &Session{Ctl: ctl, Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
	ctl.SetDeadline(time.Now().Add(10 * time.Second))
	if err := bbproto.WriteMsg(ctl, bbproto.MsgHello, hello); err != nil {
		return nil, fmt.Errorf("sending hello: %w", err)
	}
	typ, body, err := bbproto.ReadMsg(ctl)
	if err != nil {
		return nil, fmt.Errorf("reading the server's answer: %w", err)
	}
	switch typ {
	case bbproto.MsgRefuse:
		var r bbproto.Refuse
		if err := bbproto.Decode(body, &r); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("server refused the test: %s", r.Reason)
	case bbproto.MsgAccept:
	default:
		return nil, fmt.Errorf("server answered hello with message type %d", typ)
	}
	if err := bbproto.Decode(body, &ss.Accept); err != nil {
		return nil, err
	}
	ss.ID = ss.Accept.Session
	ctl.SetDeadline(time.Time{})
	return ss, nil
}
