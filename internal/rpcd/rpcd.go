// Package rpcd answers OpenWrt's rpcd for luci-app-sqmkit, through rpcd's
// exec-plugin protocol (its plugin.c): `sqmkit rpcd list` prints every
// method with its arguments as one JSON object, and `sqmkit rpcd call
// METHOD` reads the arguments as a JSON object on stdin and prints the
// answer as one JSON object. An error is an answer too, {"error": "..."},
// which the pages show; rpcd would turn anything but an object into an
// "invalid argument" the user cannot read. It is the one implementation
// of what the pages do: the CLI's packages, called as the CLI calls them.
package rpcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/sizelimit"
)

// Env is what the methods act on: the router's files under Root, its
// kernel through Opts, and the background jobs' state under Jobs.
type Env struct {
	Root string // "/" on a router; everything under /etc, /sys and /var/run is read under it
	File string // the SQM config; "" is Root/etc/config/sqm
	Opts apply.Options
	// Exe is the sqmkit binary the background jobs (test, tune) run.
	Exe string
	// Doctor runs the doctor (doctor.Run; tests put a pasted tree in).
	Doctor func(doctor.Options) (*doctor.Diagnosis, error)
	Now    func() time.Time
}

// method is one rpcd method: the arguments rpcd learns from `list` (a
// string's example "", a number's 32, a boolean's false: rpcd types them
// from the JSON values), whether the ACL puts it in the write set, and
// what it does with its arguments.
type method struct {
	args  map[string]any
	write bool
	call  func(e *Env, args map[string]any) (any, error)
}

// methods are every method of the plugin, by name (TestACLListsEveryMethod).
var methods = map[string]method{
	"status":      {args: map[string]any{}, call: (*Env).status},
	"counters":    {args: map[string]any{}, call: (*Env).counters},
	"doctor":      {args: map[string]any{}, call: (*Env).doctor},
	"test_state":  {args: map[string]any{}, call: (*Env).testState},
	"test_result": {args: map[string]any{"id": ""}, call: (*Env).testResult},
	"test_start":  {args: map[string]any{"server": "", "token": ""}, write: true, call: (*Env).testStart},
	"tune_state":  {args: map[string]any{}, call: (*Env).tuneState},
	"tune_start":  {args: map[string]any{"server": "", "section": "", "target": "", "budget": 32, "token": ""}, write: true, call: (*Env).tuneStart},
	"tune_write":  {args: map[string]any{}, write: true, call: (*Env).tuneWrite},
	"tune_undo":   {args: map[string]any{"section": ""}, write: true, call: (*Env).tuneUndo},
	"autorate":    {args: map[string]any{}, call: (*Env).autorate},
}

// Methods names the methods, read ones and write ones apart, as the ACL
// grants them.
func Methods() (read, write []string) {
	for name, m := range methods {
		if m.write {
			write = append(write, name)
		} else {
			read = append(read, name)
		}
	}
	slices.Sort(read)
	slices.Sort(write)
	return read, write
}

// List writes the methods and their arguments for rpcd.
func List(w io.Writer) error {
	sig := map[string]map[string]any{}
	for name, m := range methods {
		sig[name] = m.args
	}
	return json.NewEncoder(w).Encode(sig)
}

// sessionArg is what uhttpd adds to every call's arguments (the caller's
// session), and rpcd hands an exec plugin the whole message: it is
// dropped, whatever else a caller adds is refused (TestSessionArgument).
const sessionArg = "ubus_rpc_session"

// maxArgs caps what a call reads from stdin: a few short strings.
const maxArgs = 64 << 10

// Call answers one call of name with the JSON arguments in, always with
// one JSON object on out.
func Call(e *Env, name string, in io.Reader, out io.Writer) error {
	v, err := e.call(name, in)
	if err != nil {
		v = map[string]string{"error": err.Error()}
	}
	return json.NewEncoder(out).Encode(v)
}

func (e *Env) call(name string, in io.Reader) (any, error) {
	m, ok := methods[name]
	if !ok {
		return nil, fmt.Errorf("no method %q (the plugin has %s)", name, strings.Join(slices.Sorted(maps.Keys(methods)), ", "))
	}
	b, err := sizelimit.Read(in, "stdin", maxArgs, "the call's arguments")
	if err != nil {
		return nil, err
	}
	args := map[string]any{}
	if s := strings.TrimSpace(string(b)); s != "" && s != "null" {
		if err := json.Unmarshal(b, &args); err != nil {
			return nil, fmt.Errorf("%s: the arguments are not a JSON object: %v", name, err)
		}
	}
	delete(args, sessionArg)
	for k := range args {
		if _, ok := m.args[k]; !ok {
			return nil, fmt.Errorf("%s takes no argument %q", name, k)
		}
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return m.call(e, args)
}

// readable says why the SQM config cannot be read at all (it does not
// parse), nil when it can: every page's state fails with these same
// words, which the pages show as one banner naming the file and line
// (TestBrokenConfigOneAnswer); a page never falls back to a default in
// its place.
func (e *Env) readable() error {
	if _, err := config.Load(e.Root, e.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (fix: correct %s on LuCI's SQM page or in the file)", err, config.Path(e.Root, e.File))
	}
	return nil
}

// str is the string argument name, "" when absent; a value of another
// type is an error that names the argument.
func str(args map[string]any, name string) (string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("argument %s: want a string, got %v", name, v)
	}
	return strings.TrimSpace(s), nil
}

// num is the number argument name, 0 when absent.
func num(args map[string]any, name string) (int, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return 0, nil
	}
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) {
		return 0, fmt.Errorf("argument %s: want a whole number, got %v", name, v)
	}
	return int(f), nil
}

// recover puts back the rates of a tune that died with its trial rates in
// force (apply.RecoverTrials) and says what it did, for the pages.
func (e *Env) recover() []string {
	qs, err := config.Resolve(e.Root, e.File, nil, "")
	if err != nil && len(qs) == 0 {
		return []string{}
	}
	return append([]string{}, apply.RecoverTrials(e.Root, qs, e.Opts)...)
}

// queues are the enabled queues with their device facts and kept rates;
// none enabled is no error (a fresh install: the pages say so). Sections
// refused for their own mistakes come back in bad, beside the others.
func (e *Env) queues() ([]apply.Target, *config.BadSections, error) {
	if err := e.readable(); err != nil {
		return nil, nil, err
	}
	qs, err := config.Resolve(e.Root, e.File, nil, "")
	var bad *config.BadSections
	switch {
	case errors.Is(err, config.ErrNoneEnabled):
		return nil, nil, nil
	case errors.As(err, &bad):
	case err != nil:
		return nil, nil, err
	}
	ts, err := apply.Targets(e.Root, qs, e.Opts.RateDir)
	return ts, bad, err
}
