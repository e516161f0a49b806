package tc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// DefaultCacheDir holds one file per tc batch proven acceptable in this
// boot, with the rest of sqmkit's runtime state: /var/run is a tmpfs on
// Debian (/run) and on OpenWrt (/tmp/run; OpenWrt has no /run, and a
// path there would land on flash), so a reboot (new kernel, new modules)
// forgets it, and uninstall removes it with the rest (TestRuntimeState).
const DefaultCacheDir = "/var/run/sqmkit/probe"

// Prober proves tc batches acceptable before they touch a real interface, by
// running them in a throwaway network namespace on ifb twins of the devices
// they name. Modules are global, so autoloading behaves exactly as it will
// for the real run, while no real interface is ever touched.
type Prober struct {
	Runner   *Runner
	CacheDir string       // "" disables the cache
	BootID   string       // defaults to /proc/sys/kernel/random/boot_id
	Log      func(string) // one line per decision
}

// Rejection is a batch line the kernel or tc refused during a probe.
type Rejection struct {
	Line int      // 1-based line of the checked batch; 0 when tc died without saying
	Argv []string // the refused line
	Msg  string   // what tc printed
	Hint string   // the module and package to install when a kind is missing
}

func (r *Rejection) Error() string {
	s := "tc refused"
	if r.Argv != nil {
		s += fmt.Sprintf(" line %d `tc %s`", r.Line, strings.Join(r.Argv, " "))
	}
	s += ": " + r.Msg
	if r.Hint != "" {
		s += " — " + r.Hint
	}
	return s
}

// Probe checks each batch and returns one result per batch: nil when it is
// accepted, a *Rejection otherwise. The error is set when probing itself is
// impossible (no network namespaces); callers then apply unprobed and rely on
// rollback. A cold probe costs one ip and one tc process; batches accepted
// before in this boot cost none.
func (p *Prober) Probe(batches [][][]string) ([]error, error) {
	res := make([]error, len(batches))
	keys := make([]string, len(batches))
	var todo []int
	for i, b := range batches {
		keys[i] = p.key(b)
		if keys[i] != "" {
			// a regular file only: nothing planted there vouches for a batch
			if f, err := statefile.Open(filepath.Join(p.CacheDir, keys[i])); err == nil {
				f.Close()
				p.log(fmt.Sprintf("probe: batch %d accepted earlier this boot (cache %s)", i+1, keys[i][:12]))
				continue
			}
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return res, nil
	}
	sub := make([][][]string, len(todo))
	for j, i := range todo {
		sub[j] = batches[i]
	}
	subRes, err := p.probeFresh(sub)
	if err != nil {
		return nil, err
	}
	for j, i := range todo {
		switch {
		case errors.Is(subRes[j], errTwin):
			p.log(fmt.Sprintf("probe: batch %d: %v; applying it for real, with rollback", i+1, subRes[j]))
		case subRes[j] != nil:
			res[i] = subRes[j]
		case keys[i] != "":
			p.remember(keys[i], batches[i])
		}
	}
	return res, nil
}

// errTwin marks a refusal the probe cannot trust: nssmirred binds to the NSS
// interface of its fromdev, which an ifb twin is not, so only a refusal that
// names a missing module counts.
var errTwin = errors.New("nssmirred cannot be proven on a twin device")

// probeFresh runs batches in one new namespace. When tc dies without naming
// a line, the batches cannot be told apart, so each is retried alone.
func (p *Prober) probeFresh(batches [][][]string) ([]error, error) {
	var res []error
	var died bool
	err := inFreshNetns(func() error {
		var e error
		res, died, e = p.run(batches)
		return e
	})
	if err != nil || !died || len(batches) == 1 {
		return res, err
	}
	for i, b := range batches {
		one, err := p.probeFresh([][][]string{b})
		if err != nil {
			return nil, err
		}
		res[i] = one[0]
	}
	return res, nil
}

// run executes inside the fresh namespace.
func (p *Prober) run(batches [][][]string) (res []error, died bool, err error) {
	res = make([]error, len(batches))
	// Each batch gets twins of its own devices under synthetic names, so
	// batches that use the same device (two candidate trees for one root)
	// do not collide.
	var all, twins [][]string
	start := make([]int, len(batches)) // first line of each batch in all, 1-based
	for i, b := range batches {
		start[i] = len(all) + 1
		names := map[string]string{}
		add := []string{"type", "ifb"}
		if slices.ContainsFunc(b, func(l []string) bool { return slices.Contains(l, "cake_mq") }) {
			// cake_mq refuses a single-queue device; the planner plans it
			// only where the real one has several
			add = []string{"numtxqueues", "2", "type", "ifb"}
		}
		for j, d := range devices(b) {
			names[d] = fmt.Sprintf("sqmp%dd%d", i, j)
			twins = append(twins, append([]string{"link", "add", "name", names[d]}, add...), []string{"link", "set", "dev", names[d], "up"})
		}
		for _, l := range b {
			all = append(all, renameDevices(l, names))
		}
	}
	if _, err := p.Runner.Batch("ip", false, twins); err != nil {
		var be *BatchError
		if !errors.As(err, &be) {
			return nil, false, err
		}
		f, _ := be.First()
		rej := &Rejection{Msg: "cannot create ifb devices: " + f.Msg, Hint: hintFor("ifb")}
		for i := range res {
			res[i] = rej
		}
		return res, false, nil
	}
	_, err = p.Runner.Batch("tc", true, all)
	if err == nil {
		return res, false, nil
	}
	var be *BatchError
	if !errors.As(err, &be) {
		return nil, false, err
	}
	for _, f := range be.Failures {
		if f.Line == 0 {
			if len(batches) == 1 && res[0] == nil {
				res[0] = &Rejection{Msg: f.Msg, Hint: hint(nil, f.Msg)}
			}
			died = true
			continue
		}
		i := len(start) - 1
		for i > 0 && start[i] > f.Line {
			i--
		}
		if res[i] != nil {
			continue // later lines of a refused batch fail as a consequence
		}
		line := f.Line - start[i] + 1
		argv := batches[i][line-1]
		h := hint(argv, f.Msg)
		if h == "" && slices.Contains(argv, "nssmirred") {
			res[i] = errTwin
			continue
		}
		res[i] = &Rejection{Line: line, Argv: argv, Msg: f.Msg, Hint: h}
	}
	return res, died, nil
}

// inFreshNetns runs fn on an OS thread moved into a new network namespace.
// Processes fn starts are forked from that thread and inherit the namespace.
// The thread stays locked, so the runtime discards it when fn returns and
// the namespace (with its ifb twins) disappears with it.
func inFreshNetns(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("probe: new network namespace: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// devices lists, in first-use order, every device a batch names.
func devices(lines [][]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lines {
		for i := 0; i+1 < len(l); i++ {
			if (l[i] == "dev" || l[i] == "fromdev") && !seen[l[i+1]] {
				seen[l[i+1]] = true
				out = append(out, l[i+1])
			}
		}
	}
	return out
}

func renameDevices(argv []string, names map[string]string) []string {
	out := append([]string{}, argv...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "dev" || out[i] == "fromdev" {
			out[i+1] = names[out[i+1]]
		}
	}
	return out
}

// key names a batch's cache entry: the same text, the same tc binary and the
// same boot give the same verdict. The tc binary is part of it because
// installing a different tc (e.g. tc-full) is the usual fix for a refusal.
func (p *Prober) key(batch [][]string) string {
	if p.CacheDir == "" {
		return ""
	}
	boot := p.BootID
	if boot == "" {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err != nil {
			return ""
		}
		boot = strings.TrimSpace(string(b))
	}
	text, err := Render(batch)
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "boot %s\n", boot)
	if path, err := exec.LookPath("tc"); err == nil {
		if st, err := os.Stat(path); err == nil {
			fmt.Fprintf(h, "tc %s %d %d\n", path, st.Size(), st.ModTime().UnixNano())
		}
	}
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

func (p *Prober) remember(key string, batch [][]string) {
	text, _ := Render(batch)
	if err := statefile.Write(filepath.Join(p.CacheDir, key), []byte(text), 0o644); err != nil {
		p.log("probe: cannot cache verdict: " + err.Error())
	}
}

func (p *Prober) log(s string) {
	if p.Log != nil {
		p.Log(s)
	}
}
