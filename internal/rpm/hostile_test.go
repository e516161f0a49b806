//go:build !router

package rpm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// TestHostileServers: a responsiveness server that loads nothing, or
// answers probes with nothing or a flood, gets no grade (INCOMPLETE, with
// the reason); one that redirects off https or off the config's host, or
// hands out credentials, steers nowhere. Over both wires: HTTP/1.1 is the
// router build's only one (newWire, wire_router.go).
func TestHostileServers(t *testing.T) {
	setUploadSize(t, 1<<20)
	// internal is "an address inside the network" a hostile server would
	// like the client to hit: it must see no request at all
	var internalHits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { internalHits.Add(1) }))
	t.Cleanup(internal.Close)
	cases := hostileCases(internal.URL)

	runs := runHostile(t, cases)
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal server got %d requests", n)
	}
	for i, c := range cases {
		for w, wire := range []string{"http2", "http1"} {
			t.Run(c.name+"/"+wire, func(t *testing.T) {
				r := runs[i][w]
				res, err := r.res, r.err
				if r.auth != 0 {
					t.Errorf("%d requests carried credentials", r.auth)
				}
				for p, most := range c.most {
					if n := r.counts(p); n > most {
						t.Errorf("%d requests to %s, want at most %d", n, p, most)
					}
				}
				if c.err != "" {
					if err == nil || !strings.Contains(err.Error(), c.err) {
						t.Fatalf("RunPhases: %v, want an error with %q", err, c.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("RunPhases: %v", err)
				}
				notes := strings.Join(append(res.Notes, res.Incomplete), "\n")
				switch {
				case c.want == "" && (res.Incomplete != "" || res.Grades.DSLReports == ""):
					t.Errorf("want a graded result: incomplete %q, grades %+v", res.Incomplete, res.Grades)
				case c.want != "" && (!strings.Contains(res.Incomplete, c.want) || res.Grades.DSLReports != "" || res.Grades.Percentile != ""):
					t.Errorf("incomplete %q, grades %+v; want no grade and %q", res.Incomplete, res.Grades, c.want)
				}
				if c.note != "" && !regexp.MustCompile(c.note).MatchString(notes) {
					t.Errorf("notes %q lack %q", notes, c.note)
				}
				for _, ph := range res.Phases {
					if ph.Grade != "" && c.want != "" {
						t.Errorf("phase %s graded %s", ph.Name, ph.Grade)
					}
				}
				if res.RPM != nil && c.want != "" {
					t.Errorf("an RPM of %.0f for a test without load", res.RPM.RPM)
				}
			})
		}
	}
}

// hostileRun is one case's test over one wire: its result, how many
// requests carried credentials, and the requests per path.
type hostileRun struct {
	res    *bbresult.Result
	err    error
	auth   int
	counts func(string) int
}

// runHostile runs every case over both wires (HTTP/2, HTTP/1.1).
func runHostile(t *testing.T, cases []hostileCase) [][2]hostileRun {
	// Every case runs at once, as it would not under t.Parallel's two at a
	// time: each waits on its phases, not on the CPU.
	runs := make([][2]hostileRun, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		for w, http1 := range []bool{false, true} {
			s, err := NewServer(ServerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			counts, auth := map[string]int{}, 0
			sv := served{count: func(p string) int { mu.Lock(); defer mu.Unlock(); return counts[p] }}
			sv.addr = startServer(t, s, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					counts[r.URL.Path]++
					if r.Header.Get("Authorization") != "" {
						auth++
					}
					mu.Unlock()
					if c.override == nil || !c.override(sv, w, r) {
						h.ServeHTTP(w, r)
					}
				})
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := bbclient.Config{Server: "https://" + sv.addr + pathConfig, Idle: time.Second, Download: 2 * time.Second,
					Upload: 2 * time.Second, Bidir: 2 * time.Second, Streams: 2, ProbeInterval: bbclient.DefaultProbeInterval}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := RunPhases(ctx, PhaseConfig{Test: cfg, Insecure: true, HTTP1: http1})
				mu.Lock()
				runs[i][w] = hostileRun{res: res, err: err, auth: auth, counts: sv.count}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return runs
}

// served is one case's server, as its answers see it.
type served struct {
	addr  string
	count func(path string) int
}

// hostileCase is a server's hostile answer and what the client must make
// of it.
type hostileCase struct {
	name string
	// override answers path instead of the server (ok false: leave it)
	override func(s served, w http.ResponseWriter, r *http.Request) bool
	err      string // RunPhases fails with it
	want     string // else the result is INCOMPLETE with it ("" graded)
	note     string // a note the result carries
	most     map[string]int
}

// hostileCases are TestHostileServers' servers; internal is the address a
// hostile server would like the client to reach.
func hostileCases(internal string) []hostileCase {
	return append(loadCases(), steerCases(internal)...)
}

// loadCases are servers whose load or probes never come.
func loadCases() []hostileCase {
	hang := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	return []hostileCase{
		{name: "empty download", want: "no grade: the download never carried data", note: "empty body",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				w.Header().Set("Content-Length", "0")
				return true
			},
			// each load connection asks once: a load that answered nothing is
			// not fetched again (2 streams in each of 2 phases that download)
			most: map[string]int{pathLarge: 4}},
		{name: "download never starts", want: "no grade: the download never carried data",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				hang(w, r)
				return true
			}},
		{name: "upload never read", want: "no grade: the upload stopped carrying data",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathUpload {
					return false
				}
				<-r.Context().Done()
				return true
			}},
		{name: "probes hang", want: "latency probe",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathSmall {
					return false
				}
				<-r.Context().Done()
				return true
			}},
		{name: "probes flood", want: "latency probe",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathSmall {
					return false
				}
				buf := make([]byte, 64<<10)
				for r.Context().Err() == nil {
					if _, err := w.Write(buf); err != nil {
						break
					}
				}
				return true
			}},
	}
}

// steerCases are servers that try to send the client elsewhere.
func steerCases(internal string) []hostileCase {
	return []hostileCase{
		{name: "load redirected to plain http", want: "no grade: the download never carried data", note: "not https",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				http.Redirect(w, r, internal+"/admin", http.StatusFound)
				return true
			}},
		{name: "load redirected to another host", want: "no grade: the download never carried data", note: "another host than the config's",
			override: func(s served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				http.Redirect(w, r, "https://localhost"+s.addr[strings.LastIndex(s.addr, ":"):]+pathLarge, http.StatusFound)
				return true
			}},
		// the chain ends at its limit, or, on a busy host, the phase ends
		// first and the note counts the redirects
		{name: "load redirected in a loop", want: "no grade: the download never carried data",
			note: `more than 5 redirects|large-download endpoint \S+ answered the load's requests with \d+ redirects and moved no data`,
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				http.Redirect(w, r, pathLarge, http.StatusFound)
				return true
			},
			// each load connection gives up after maxRedirects
			most: map[string]int{pathLarge: 4 * (maxRedirects + 1)}},
		{name: "load redirected with credentials", want: "no grade: the download never carried data", note: "carries credentials",
			override: func(s served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge {
					return false
				}
				http.Redirect(w, r, "https://user:secret@"+s.addr+"/large2", http.StatusFound)
				return true
			}},
		{name: "config redirected off https", err: "not https",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathConfig {
					return false
				}
				http.Redirect(w, r, internal+"/config", http.StatusMovedPermanently)
				return true
			}},
		{name: "config with credentials", err: "carries credentials",
			override: func(s served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathConfig {
					return false
				}
				u := "https://user:secret@" + s.addr
				fmt.Fprintf(w, `{"version":1,"urls":{"small_download_url":"%[1]s/small","large_download_url":"%[1]s/large","upload_url":"%[1]s/upload"}}`, u)
				return true
			}},
		{name: "redirect on the config's host is followed", note: "",
			override: func(_ served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathLarge || r.URL.Query().Get("moved") != "" {
					return false
				}
				http.Redirect(w, r, pathLarge+"?moved=1", http.StatusTemporaryRedirect)
				return true
			}},
		{name: "endpoints on another host are named", note: "sends the load and the probes to another host, localhost:",
			override: func(s served, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != pathConfig {
					return false
				}
				u := "https://localhost" + s.addr[strings.LastIndex(s.addr, ":"):]
				fmt.Fprintf(w, `{"version":1,"urls":{"small_download_url":"%[1]s/small","large_download_url":"%[1]s/large","upload_url":"%[1]s/upload"}}`, u)
				return true
			}},
	}
}
