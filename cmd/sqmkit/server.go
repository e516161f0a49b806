package main

import (
	"cmp"
	"fmt"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
)

// server is the server a test or tune measures against, as resolved from
// what the user gave.
type server struct {
	Addr   string // host[:port] of a sqmkit serve, or a responsiveness server's config URL
	URL    bool   // a responsiveness server: round trips only (rpm.RunPhases)
	Public bool   // none was given: bbproto.DefaultServer
}

// resolveServer checks s as a user wrote it (never a flag, a path or
// markup when it is passed on); "" is $SQMKIT_SERVER, else the first of
// qs' test_server options (the router's /etc/config/sqm), else the public
// default (TestDefaultServer).
func resolveServer(s string, qs []config.Queue) (server, error) {
	sv := server{Addr: s}
	if s == "" {
		configured := ""
		for _, q := range qs {
			configured = cmp.Or(configured, q.TestServer)
		}
		sv.Addr, sv.Public = bbproto.DefaultServer(configured), true
	}
	sv.URL = bbproto.IsURL(sv.Addr)
	if err := bbproto.CheckTarget(sv.Addr); err != nil {
		return sv, fmt.Errorf("SERVER %v", err)
	}
	return sv, nil
}

// note is what a result says about a server nobody named.
func (sv server) note() string {
	if !sv.Public {
		return ""
	}
	return fmt.Sprintf("no SERVER given: measured against %s (a SERVER argument, SQMKIT_SERVER or the queue's option test_server names another)", sv.Addr)
}
