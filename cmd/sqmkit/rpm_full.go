//go:build !router

package main

import (
	"context"
	"log"
	"net"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/rpm"
)

// measureRPM runs the responsiveness test (HTTPS, HTTP/2). The router
// build leaves it out: TLS and HTTP/2 are a third of the binary, and a
// router's CPU would measure itself as much as the network.
func measureRPM(ctx context.Context, url string, insecure bool) (*bbresult.RPM, []string, error) {
	r, err := rpm.Measure(ctx, url, rpm.Options{Insecure: insecure})
	if err != nil {
		return nil, nil, err
	}
	return r.BBResult(), r.Notes, nil
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
	logger.Printf("rpm: config https://%s/config, certificate sha256 %s; test from a Mac: networkQuality -k -C https://%s/config (-k: the certificate is self-signed unless --rpm-cert)",
		ln.Addr(), rs.Fingerprint(), ln.Addr())
	return func() error { return rs.Serve(ctx, ln) }, nil
}
