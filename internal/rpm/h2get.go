//go:build !router

package rpm

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// client is an HTTP client on tr that follows only the redirects m's
// policy allows.
func (m *measurer) client(tr *http.Transport) *http.Client {
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		return m.pol.allow(req.URL, len(via)-1)
	}}
}

// get fetches url with at most limit body bytes; it insists on 200 and
// HTTP/2 and explains a certificate it cannot verify.
func get(ctx context.Context, c *http.Client, url string, limit int64) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept-Encoding", "identity") // the draft requires it
	resp, err := c.Do(req)
	if err != nil {
		if hinted := certHint(url, err); hinted != err {
			return nil, nil, hinted
		}
		return nil, nil, fmt.Errorf("rpm: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		err = fmt.Errorf("body over %d bytes", limit) // as the HTTP/1.1 wire's limited
	}
	if err != nil {
		return nil, nil, fmt.Errorf("rpm: %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("rpm: %s: %w", url, statusError(resp.Status))
	}
	if resp.ProtoMajor != 2 {
		return nil, nil, fmt.Errorf("rpm: %s: server answered over %s, not HTTP/2 (responsiveness needs probes multiplexed onto the load connections)", url, resp.Proto)
	}
	return body, resp, nil
}
