// Package bbproto is the wire format of sqmkit's bufferbloat test.
//
// A test uses three kinds of traffic to one server port (TCP and UDP):
//
//   - one TCP control connection: length-prefixed JSON messages
//     (Hello → Accept|Refuse, then Done → Report);
//   - TCP data streams that open with a fixed 16-byte StreamHeader naming the
//     session and the direction, then carry Frames (bulk data, and small
//     ping/pong frames that measure latency inside the loaded stream);
//   - UDP probes: fixed-layout datagrams, answered in place so that a reply is
//     never larger than its request (no amplification).
//
// Every parser here rejects what it does not understand with an error and
// never allocates more than a caller-given bound.
package bbproto

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version; client and server must agree exactly.
const Version = 1

// DefaultPort is used for both TCP and UDP when the user names no port.
const DefaultPort = 8693

// SessionID names one test. It is random, and the server also checks the
// source address of streams and probes, so guessing one buys nothing.
type SessionID [8]byte

func (s SessionID) String() string { return hex.EncodeToString(s[:]) }

// MarshalText lets SessionID travel as a hex string in control messages.
func (s SessionID) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the hex form.
func (s *SessionID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(s) {
		return fmt.Errorf("session id: want %d hex digits, got %d", 2*len(s), len(b))
	}
	_, err := hex.Decode(s[:], b)
	return err
}

var errShort = errors.New("truncated")

// ReadFull is io.ReadFull that reports a short read as errShort wrapped with
// what was being read, so logs say which field a client cut off.
func readFull(r io.Reader, b []byte, what string) error {
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: %w", what, errShort)
		}
		return err
	}
	return nil
}

var be = binary.BigEndian
