package http1

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzResponse feeds a server's answer, any bytes at all, to the reader a
// router runs on every test: it never panics, never buffers a header line
// past maxLine, and never hands the caller more body than the answer held.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: https://evil.example/\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nbody to the end",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n",
		"SSH-2.0-OpenSSH\r\n",
		"HTTP/1.1 abc\r\n\r\n",
		"HTTP/1.1 -200 Odd\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Conn{br: bufio.NewReaderSize(bytes.NewReader(data), 32<<10)}
		code, length, chunked, err := c.readHead()
		if err != nil {
			return
		}
		if code < 100 || code > 999 || len(c.location) > maxLine {
			t.Fatalf("code %d, location of %d bytes", code, len(c.location))
		}
		var body countingWriter
		if err := c.readBody(length, chunked, &body); err == nil && body.n > int64(len(data)) {
			t.Fatalf("a body of %d bytes from an answer of %d", body.n, len(data))
		}
	})
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)
