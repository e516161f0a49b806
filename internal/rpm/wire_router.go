//go:build router

package rpm

// newWire is HTTP/1.1 always: the router build has no HTTP/2.
func newWire(cfg PhaseConfig, log func(string)) wire {
	return &h1{tls: clientTLS(cfg.Insecure), log: log, segments: cfg.Test.OneSegment}
}
