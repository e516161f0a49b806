//go:build !router

package rpm

// newWire is HTTP/2, the draft's protocol, unless cfg asks for the
// router build's HTTP/1.1.
func newWire(cfg PhaseConfig, log func(string)) wire {
	if cfg.HTTP1 {
		return &h1{tls: clientTLS(cfg.Insecure), log: log, segments: cfg.Test.OneSegment}
	}
	return &measurer{opts: Options{Insecure: cfg.Insecure, Log: log}, tls: clientTLS(cfg.Insecure), segments: cfg.Test.OneSegment}
}
