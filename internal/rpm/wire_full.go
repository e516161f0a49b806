//go:build !router

package rpm

// newWire is HTTP/2, the draft's protocol, unless http1 asks for the
// router build's.
func newWire(http1, insecure bool, log func(string)) wire {
	if http1 {
		return &h1{tls: clientTLS(insecure), log: log}
	}
	return &measurer{opts: Options{Insecure: insecure, Log: log}, tls: clientTLS(insecure)}
}
