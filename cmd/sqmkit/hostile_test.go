package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// TestHostileServerBothBuilds: against a responsiveness server whose large
// download answers 200 with an empty body, `sqmkit test` prints no grade
// and exits 1 with the reason, in the full build (HTTP/2) and the router
// build (HTTP/1.1); internal/rpm's TestHostileServers has every other
// hostile answer.
func TestHostileServerBothBuilds(t *testing.T) {
	var base string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/config":
			fmt.Fprintf(w, `{"version":1,"urls":{"small_https_download_url":"%[1]s/small","large_https_download_url":"%[1]s/large","https_upload_url":"%[1]s/slurp"}}`, base)
		case "/small":
			w.Write([]byte("x"))
		case "/large":
			w.Header().Set("Content-Length", "0")
		case "/slurp":
			io.Copy(io.Discard, r.Body)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base = srv.URL
	args := []string{"--quiet", "--root", t.TempDir(), "--rpm-insecure", "--idle", "1s", "--download", "2s", "--upload", "2s", "--bidir", "0", base + "/config"}
	const want = "INCOMPLETE: not graded (no grade: the download never carried data"
	var out, errb strings.Builder
	if code := runTest(args, &out, &errb); code != 1 || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "Grade A") {
		t.Errorf("full build: exit %d\n%s%s\nwant 1, no grade and %q", code, out.String(), errb.String(), want)
	}
	b, err := exec.Command(buildSqmkit(t, "router"), append([]string{"test"}, args...)...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 1 || !strings.Contains(string(b), want) || !strings.Contains(string(b), "empty body") || strings.Contains(string(b), "Grade A") {
		t.Errorf("router build: exit %d (%v)\n%s\nwant 1, no grade and %q", code, err, b, want)
	}
}
