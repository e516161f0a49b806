// Package testrun is a test or a tune's measurement from where it runs:
// the server it measures against (named, $SQMKIT_SERVER, the queue's
// test_server or the public default), on a router the route to it checked
// against the queues, the queues held, and the shaper's counters and the
// CPU read beside the test (Test). The commands (sqmkit test, tune) parse
// their flags and print; the work is here, once for both.
package testrun

import (
	"cmp"
	"errors"
	"fmt"
	"os"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/rpm"
)

// Server is the server a test or tune measures against, as resolved from
// what the user gave.
type Server struct {
	Addr   string // host[:port] of a sqmkit serve, or a responsiveness server's config URL
	URL    bool   // a responsiveness server: round trips only (rpm.RunPhases)
	Public bool   // none was given: bbproto.DefaultServer
	// From names where a server nobody typed came from: "$SQMKIT_SERVER",
	// "option test_server", or "" (the compiled-in public default).
	From string
}

// Resolve checks s as a user wrote it (never a flag, a path or markup
// when it is passed on); "" is $SQMKIT_SERVER, else the first of qs'
// test_server options (the router's /etc/config/sqm), else the public
// default (TestResolve).
func Resolve(s string, qs []config.Queue) (Server, error) {
	sv := Server{Addr: s}
	if s == "" {
		configured := ""
		for _, q := range qs {
			configured = cmp.Or(configured, q.TestServer)
		}
		sv.Addr, sv.Public = bbproto.DefaultServer(configured), true
		switch {
		case os.Getenv("SQMKIT_SERVER") != "":
			sv.From = "$SQMKIT_SERVER"
		case configured != "":
			sv.From = "option test_server"
		}
	}
	sv.URL = bbproto.IsURL(sv.Addr)
	if err := bbproto.CheckTarget(sv.Addr); err != nil {
		if sv.From != "" {
			return sv, fmt.Errorf("%s: %v (fix: correct it, or unset it for the public server)", sv.From, err)
		}
		return sv, fmt.Errorf("SERVER %v", err)
	}
	return sv, nil
}

// Note is what a result says about a server nobody named.
func (sv Server) Note() string {
	if !sv.Public {
		return ""
	}
	from := ""
	if sv.From != "" {
		from = ", from " + sv.From
	}
	return fmt.Sprintf("no SERVER given: measured against %s%s (a SERVER argument, SQMKIT_SERVER or the queue's option test_server names another)", sv.Addr, from)
}

// Blame adds where a server that could not be had came from when nobody
// typed it: a bad $SQMKIT_SERVER is named, not taken for the network's
// fault.
func (sv Server) Blame(err error) error {
	if !errors.Is(err, rpm.ErrConfigFetch) || sv.From == "" {
		return err
	}
	return fmt.Errorf("%w (the server is %s's)", err, sv.From)
}
