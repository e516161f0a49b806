//go:build !router

package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"net"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/rpm"
)

// measureRPM runs the responsiveness test (HTTPS, HTTP/2). The router
// build leaves it out: TLS and HTTP/2 are a third of the binary, and a
// router's CPU would measure itself as much as the network.
// A test cut short returns what it measured (nil when nothing) with the
// error.
func measureRPM(ctx context.Context, url string, opts rpmOptions) (*bbresult.RPM, []string, error) {
	r, err := rpm.Measure(ctx, url, rpm.Options{Insecure: opts.insecure, MaxConns: opts.conns, MaxRate: opts.rate})
	if err != nil && (r.Download.Probes == 0 || math.IsNaN(r.RPM)) {
		return nil, r.Notes, err
	}
	notes := r.Notes
	for _, st := range []struct {
		name string
		s    rpm.Stage
	}{{"download", r.Download}, {"upload", r.Upload}} {
		if st.s.Probes > 0 {
			notes = append(notes, fmt.Sprintf("%s: %.0f RPM on %d connections (%s confidence): TCP %.1f, TLS %.1f, GET %.1f ms on new connections, %.1f ms on loaded ones",
				st.name, st.s.RPM, st.s.Conns, st.s.Confidence, st.s.TCPms, st.s.TLSms, st.s.HTTPForeignMs, st.s.HTTPSelfMs))
		}
	}
	return r.BBResult(), notes, err
}

// startRPM listens for the responsiveness test on addr and returns the
// function that serves it until ctx ends.
func startRPM(ctx context.Context, addr, cert, key string, logger *log.Logger) (func() error, error) {
	host, _ := bbproto.SplitHostPort(addr)
	rs, err := rpm.NewServer(rpm.ServerConfig{Names: []string{host}, CertFile: cert, KeyFile: key,
		Log: func(s string) { logger.Print(s) }})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cert != "" {
		logger.Printf("rpm: config https://%s/config, certificate %s (sha256 %s); test from a Mac: networkQuality -C https://%s/config",
			ln.Addr(), cert, rs.Fingerprint(), ln.Addr())
	} else {
		logger.Printf("rpm: config https://%s/config, self-signed certificate sha256 %s; test from a Mac: networkQuality -k -C https://%s/config (-k accepts it; --rpm-cert serves a real one)",
			ln.Addr(), rs.Fingerprint(), ln.Addr())
	}
	return func() error { return rs.Serve(ctx, ln) }, nil
}
