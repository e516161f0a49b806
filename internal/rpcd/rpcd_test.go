package rpcd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
)

// fakeKernel adapts tcfake to apply.Kernel.
type fakeKernel struct{ *tcfake.Kernel }

func (f fakeKernel) Link(name string) apply.Link { return apply.Link(f.Kernel.Link(name)) }

const sqmFile = `config queue 'wan'
	option enabled '1'
	option interface 'wan'
	option download '20000'
	option upload '10000'
	option qdisc 'cake'
	option script 'piece_of_cake.qos'
	option autorate '1'
`

// router is a router-shaped root with one queue, started on a fake kernel.
func router(t *testing.T) (*Env, fakeKernel) {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(sqmFile), 0o644)
	k := fakeKernel{&tcfake.Kernel{}}
	k.AddDevice("wan", true)
	e := &Env{Root: root, Opts: apply.Options{Kernel: k, RateDir: t.TempDir(), Log: func(s string) { t.Log(s) }},
		Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }}
	ts, _, err := e.queues()
	if err != nil {
		t.Fatal(err)
	}
	if r := apply.Start(ts, e.Opts)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	return e, k
}

// call runs one call as rpcd would and decodes its answer.
func call(t *testing.T, e *Env, name, args string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := Call(e, name, strings.NewReader(args), &out); err != nil {
		t.Fatal(err)
	}
	if bytes.Count(out.Bytes(), []byte("\n")) != 1 {
		t.Errorf("%s: %d lines, want one JSON object", name, bytes.Count(out.Bytes(), []byte("\n")))
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%s: the answer is not a JSON object: %v\n%s", name, err, out.Bytes())
	}
	return v
}

// TestList: `list` is one JSON object of methods, each with its arguments
// typed the way rpcd reads them (a string's "", a number, a boolean).
func TestList(t *testing.T) {
	var out bytes.Buffer
	if err := List(&out); err != nil {
		t.Fatal(err)
	}
	var sig map[string]map[string]any
	if err := json.Unmarshal(out.Bytes(), &sig); err != nil {
		t.Fatal(err)
	}
	read, write := Methods()
	if len(sig) != len(read)+len(write) || len(write) == 0 {
		t.Fatalf("list has %d methods, Methods %d+%d", len(sig), len(read), len(write))
	}
	if a := sig["tune_start"]; a["server"] != "" || a["budget"] != float64(32) {
		t.Errorf("tune_start's arguments %v: want server a string and budget a 32-bit number", a)
	}
}

// TestCallErrors: an unknown method, arguments that are not an object, an
// argument a method does not take and one of the wrong type all come back
// as {"error": ...} naming what is wrong.
func TestCallErrors(t *testing.T) {
	e, _ := router(t)
	for _, c := range []struct{ method, args, want string }{
		{"nope", "{}", `no method "nope"`},
		{"status", "[1]", "not a JSON object"},
		{"status", `{"x": 1}`, `status takes no argument "x"`},
		{"test_start", `{"server": 5}`, "argument server: want a string"},
		{"test_start", `{"server": "--json=/etc/passwd"}`, "server: "},
		{"tune_start", `{"server": "h", "budget": 5}`, "budget 5 s: want 140 to 3600"},
		{"tune_start", `{"server": "h", "section": "lan"}`, `section "lan": not an enabled queue`},
		{"tune_write", `{}`, "no finished tune"},
		{"test_result", `{"id": "../x"}`, "want one of the ids"},
	} {
		if got := call(t, e, c.method, c.args); !strings.Contains(fmt.Sprint(got["error"]), c.want) {
			t.Errorf("%s %s: %v, want an error with %q", c.method, c.args, got, c.want)
		}
	}
}

// TestSessionArgument: every method answers LuCI's calls, which carry
// uhttpd's ubus_rpc_session beside their own arguments, as it answers
// without it; a caller's other additions are still refused.
func TestSessionArgument(t *testing.T) {
	e, _ := router(t)
	const session = `"ubus_rpc_session": "0123456789abcdef0123456789abcdef"`
	read, _ := Methods()
	for _, m := range read {
		args := map[string]string{"test_result": `, "id": "nope"`}[m]
		plain := call(t, e, m, "{"+strings.TrimPrefix(args, ", ")+"}")
		with := call(t, e, m, "{"+session+args+"}")
		if fmt.Sprint(plain) != fmt.Sprint(with) {
			t.Errorf("%s: with the session %v, without %v", m, with, plain)
		}
		if strings.Contains(fmt.Sprint(with["error"]), "ubus_rpc_session") {
			t.Errorf("%s refused the session: %v", m, with)
		}
	}
	if got := call(t, e, "status", "{"+session+`, "extra": 1}`); !strings.Contains(fmt.Sprint(got["error"]), `no argument "extra"`) {
		t.Errorf("status with an extra argument beside the session: %v", got)
	}
}

// TestStatusCounters: status says the queue is shaped as planned with its
// directions, counters read each shaped device.
func TestStatusCounters(t *testing.T) {
	e, _ := router(t)
	st := call(t, e, "status", "")
	qs := st["queues"].([]any)
	q := qs[0].(map[string]any)
	if len(qs) != 1 || q["section"] != "wan" || q["shaped"] != true || q["backend"] != "cake" || len(q["directions"].([]any)) != 2 || q["autorate"] != true {
		t.Fatalf("status %v", st)
	}
	d := q["directions"].([]any)[1].(map[string]any)
	if d["direction"] != "download" || d["device"] != "ifb4wan" || d["root"] != "cake" || d["rate_kbit"] != float64(20000) {
		t.Errorf("download direction %v", d)
	}
	if w := q["warnings"].([]any); len(w) != 0 {
		t.Errorf("warnings %v for plausible rates", w)
	}
	// a rate that looks like a unit slip (950 typed for 950 Mbit/s) is named
	os.WriteFile(filepath.Join(e.Root, "etc/config/sqm"), []byte(strings.Replace(sqmFile, "'10000'", "'950'", 1)), 0o644)
	q = call(t, e, "status", "")["queues"].([]any)[0].(map[string]any)
	if w := fmt.Sprint(q["warnings"]); !strings.Contains(w, "upload 950 kbit/s is under 1 Mbit/s") {
		t.Errorf("warnings %s, want the upload's", w)
	}
	os.WriteFile(filepath.Join(e.Root, "etc/config/sqm"), []byte(sqmFile), 0o644)
	c := call(t, e, "counters", "{}")
	devs := c["devices"].(map[string]any)
	if c["at_ms"] != float64(e.Now().UnixMilli()) || devs["wan"] == nil || devs["ifb4wan"] == nil {
		t.Errorf("counters %v", c)
	}
}

// configRates reads back the queue's rates in the SQM file.
func configRates(t *testing.T, e *Env) config.Rates {
	t.Helper()
	qs, err := config.Resolve(e.Root, "", nil, "wan")
	if err != nil {
		t.Fatal(err)
	}
	return config.Rates{Download: qs[0].Download, Upload: qs[0].Upload}
}

// TestPlantedFIFO: a FIFO planted at autorate's status file, or at a job's
// state files, never hangs a call: it is not a regular file, so it is
// not read.
func TestPlantedFIFO(t *testing.T) {
	e, _ := router(t)
	for _, p := range []string{autorate.StatusPath(e.Root, "wan"), filepath.Join(e.job("tune").dir, "meta.json"), filepath.Join(e.job("test").dir, "log")} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, m := range []string{"autorate", "tune_state", "test_state"} {
			if got := call(t, e, m, ""); got["error"] != nil {
				t.Errorf("%s: %v", m, got)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a call hung on a planted FIFO")
	}
}

// TestBrokenConfigOneAnswer: with an /etc/config/sqm that does not parse,
// every page's state answers with the same error naming the file's line
// and the fix (the pages show one banner for it), never a default in its
// place: no public server, no "no enabled queue".
func TestBrokenConfigOneAnswer(t *testing.T) {
	e, _ := router(t)
	os.WriteFile(filepath.Join(e.Root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1\n"), 0o644)
	var first string
	for _, m := range []string{"status", "counters", "doctor", "test_state", "tune_state", "autorate"} {
		got := fmt.Sprint(call(t, e, m, "")["error"])
		if first == "" {
			first = got
		}
		if got != first || !strings.Contains(got, "etc/config/sqm:2") || !strings.Contains(got, "fix:") {
			t.Errorf("%s: %q, want the one error naming the line and the fix (first: %q)", m, got, first)
		}
	}
}
