package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// Backend names on the command line; "none" is the unshaped link.
const unshaped = "none"

// allBackends is what `run` and `all` grade when no --backends is given.
var allBackends = append([]string{unshaped}, sqmkitBackends...)

// result is the JSON each scenario (profile × backend) writes.
type result struct {
	Profile    string `json:"profile"`
	Backend    string `json:"backend"`
	Date       string `json:"date"`
	Commit     string `json:"commit"`
	Status     string `json:"status"` // pass, fail, limitation (a known physical limit), error
	Limitation string `json:"limitation,omitempty"`
	Error      string `json:"error,omitempty"`
	// Shaper rates sqmkit was configured with (95 % of the line), kbit/s.
	DownKbit int `json:"download_kbit,omitempty"`
	UpKbit   int `json:"upload_kbit,omitempty"`

	Test   *accept.Measurement `json:"test,omitempty"`       // the grade (sqmkit test)
	Cross  *accept.Measurement `json:"crosscheck,omitempty"` // iperf3 + irtt on the same path
	Checks []accept.Check      `json:"checks"`
	// FirstTry keeps a shaped grade that failed on latency alone and was
	// graded again (see regrade); Test and Checks are then the second try.
	FirstTry    *firstTry       `json:"first_try,omitempty"`
	CrossChecks []accept.Check  `json:"crosschecks,omitempty"`
	Doctor      json.RawMessage `json:"doctor,omitempty"`
	Dir         string          `json:"dir"`
}

// tools says which sqmkit subcommands exist in this build; the lab grades
// with the real ones as soon as they land.
type tools struct {
	sqmkit, tcshim          string
	start, test, serve, doc bool
}

func probeTools(bin string) tools {
	t := tools{sqmkit: filepath.Join(bin, "sqmkit"), tcshim: filepath.Join(bin, "tcshim")}
	has := func(cmd string) bool {
		sh := &shell{log: io.Discard}
		_, err := sh.run("", t.sqmkit, cmd, "-h")
		return err == nil
	}
	t.start, t.test, t.serve, t.doc = has("start") && has("stop"), has("test"), has("serve"), has("doctor")
	return t
}

// guest carries what every scenario of one guest boot shares.
type guest struct {
	tools   tools
	commit  string
	out     string
	openwrt string // the run's copy of openwrt/ (package files, test stand-ins)
	say     func(format string, a ...any)
}

// limitationKey is the profile key of a backend's recorded limitation: the
// sqmkit backend underneath (a .qos script has its backend's limits).
func limitationKey(name string) string {
	if b, err := parseBackend(name); err == nil && b.kind() != "" {
		return b.kind()
	}
	return name
}

// profileRuns builds the lab for one profile and runs each backend on it.
func (g *guest) profileRuns(p *profile.Profile, backends []string) []result {
	dir := filepath.Join(g.out, p.Name)
	os.MkdirAll(dir, 0o755)
	logf, _ := os.Create(filepath.Join(dir, "commands.log"))
	defer logf.Close()
	sh := &shell{log: logf}
	fail := func(err error) []result {
		var rs []result
		for _, b := range backends {
			rs = append(rs, result{Profile: p.Name, Backend: b, Status: "error", Error: err.Error(), Dir: dir,
				Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit})
		}
		return rs
	}
	g.say("%s: building client ⇄ router ⇄ modem ⇄ server (%d/%d kbit/s, %d ms, %d ms buffer, %s, overhead %d, %s)",
		p.Name, p.Down, p.Up, p.RTTms, p.BufferMs, p.LinkLayer, p.Overhead, p.Encap)
	t, err := buildTopo(sh, p, filepath.Join("/tmp/lab", p.Name), dir)
	if err != nil {
		return fail(err)
	}
	defer t.close()
	if err := t.startServers(g.tools.sqmkit, g.tools.serve); err != nil {
		return fail(err)
	}
	var rs []result
	for _, b := range backends {
		sdir := filepath.Join(dir, b)
		os.MkdirAll(sdir, 0o755)
		r := result{Profile: p.Name, Backend: b, Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Dir: sdir}
		if b == unshaped {
			err = g.unshaped(t, &r)
		} else {
			err = g.shaped(t, b, &r)
		}
		if err != nil {
			r.Status, r.Error = "error", err.Error()
		}
		r.Limitation = p.Limitations[limitationKey(b)]
		if r.Status == "fail" && r.Limitation != "" {
			r.Status = "limitation"
		}
		g.say("%s/%s: %s%s", p.Name, b, strings.ToUpper(r.Status), summaryLine(&r))
		writeJSON(filepath.Join(sdir, "result.json"), &r)
		rs = append(rs, r)
	}
	return rs
}

// grade runs the grading tool and the cross-check on the current path.
func (g *guest) grade(t *topo, r *result) error {
	cross, err := t.iperfIrtt(r.Dir, "crosscheck")
	if err != nil {
		return fmt.Errorf("iperf3/irtt: %w", err)
	}
	r.Cross = &cross
	if !g.tools.test || !g.tools.serve {
		// sqmkit test is not in this build yet: grade with the cross-check
		// tools and say so in the result.
		r.Test = &cross
		return nil
	}
	m, err := t.sqmkitTest(g.tools.sqmkit, r.Dir, "test")
	if err != nil {
		return fmt.Errorf("sqmkit test: %w", err)
	}
	r.Test = &m
	r.CrossChecks = accept.Cross(m, cross)
	return nil
}

func (g *guest) unshaped(t *topo, r *result) error {
	os.WriteFile(filepath.Join(r.Dir, "tc-before.txt"), []byte(t.tcStats()), 0o644)
	if err := g.grade(t, r); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	r.Checks = accept.Unshaped(*r.Test, t.p.ExpectBloatMs)
	r.Status = status(r.Checks)
	return nil
}

func status(cs []accept.Check) string {
	if accept.Passed(cs) {
		return "pass"
	}
	return "fail"
}

// shaped configures the router through its UCI files, starts the backend,
// grades, asks the doctor, stops it and checks nothing was left behind.
func (g *guest) shaped(t *topo, name string, r *result) error {
	b, err := parseBackend(name)
	if err != nil {
		return err
	}
	if !g.tools.start {
		return fmt.Errorf("this sqmkit build has no start/stop yet (bin/sqmkit start -h fails)")
	}
	r.DownKbit, r.UpKbit = t.p.Down*95/100, t.p.Up*95/100
	sc := &scenario{root: filepath.Join(t.dir, "root-"+strings.NewReplacer(":", "-", "/", "-").Replace(name)),
		dev: t.shapedDev(b.kind()), down: r.DownKbit, up: r.UpKbit}
	script := ""
	if q, ok := b.(qosBackend); ok {
		script = q.script
	}
	if err := writeRouterRoot(sc.root, t.p, sc.dev, b.kind(), script, r.DownKbit, r.UpKbit); err != nil {
		return err
	}
	if b.kind() == "nss" {
		if _, err := os.Stat(g.tools.tcshim); err != nil {
			return fmt.Errorf("nss needs the lab's tc shim: %w (make build builds bin/tcshim from lab/tcshim)", err)
		}
		// The lab's stand-in for the NSS-patched tc (lab/tcshim).
		shim := filepath.Join(t.dir, "shim")
		os.MkdirAll(shim, 0o755)
		os.Remove(filepath.Join(shim, "tc"))
		if err := os.Symlink(g.tools.tcshim, filepath.Join(shim, "tc")); err != nil {
			return err
		}
		sc.env = []string{"PATH=" + shim + ":" + os.Getenv("PATH"), "SQMKIT_REAL_TC=/usr/sbin/tc"}
	}
	sq := &shell{log: t.sh.log, env: sc.env}
	before, err := t.qdiscs()
	if err != nil {
		return err
	}
	ifbsBefore := ifbs(t.sh)
	os.WriteFile(filepath.Join(r.Dir, "tc-before.txt"), []byte(t.tcStats()), 0o644)
	out, err := b.start(g, t, sc)
	os.WriteFile(filepath.Join(r.Dir, "start.log"), []byte(out), 0o644)
	if err != nil {
		return err
	}
	os.WriteFile(filepath.Join(r.Dir, "tc-started.txt"), []byte(t.tcStats()), 0o644)
	// A start that waits for hotplug exits 0 and shapes nothing; grading
	// the bare link then would only blame the backend.
	if started, err := t.qdiscs(); err != nil || started == before {
		b.stop(g, t, sc)
		return fmt.Errorf("%s start on %s changed no qdisc: %s", name, sc.dev, lastLine(out))
	}
	gerr := g.grade(t, r)
	if gerr == nil {
		r.Checks = accept.Shaped(*r.Test, r.DownKbit)
		if regrade(r.Checks, t.p.Limitations[b.kind()]) && g.tools.test {
			g.say("%s/%s: latency bars missed (%s); grading once more with new flows", t.p.Name, name, failedNames(r.Checks))
			r.FirstTry = &firstTry{Test: r.Test, Checks: r.Checks}
			m, err := t.sqmkitTest(g.tools.sqmkit, r.Dir, "retry")
			if err != nil {
				gerr = fmt.Errorf("sqmkit test (second try): %w", err)
			} else {
				r.Test = &m
				r.Checks = accept.Shaped(m, r.DownKbit)
			}
		}
	}
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	if g.tools.doc {
		out, _ := sq.run(nsRouter, g.tools.sqmkit, "doctor", "--json", "--root", sc.root)
		os.WriteFile(filepath.Join(r.Dir, "doctor.json"), []byte(out), 0o644)
		r.Checks = append(r.Checks, doctorCheck(out))
		if json.Valid([]byte(out)) {
			r.Doctor = json.RawMessage(out)
		}
	}
	out, err = b.stop(g, t, sc)
	os.WriteFile(filepath.Join(r.Dir, "stop.log"), []byte(out), 0o644)
	if err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	after, err := t.qdiscs()
	if err != nil {
		return err
	}
	left := leftovers(before, after, ifbsBefore, ifbs(t.sh), b.kind() == "nss")
	r.Checks = append(r.Checks, accept.Check{Name: "qdiscs/IFBs left after stop", Got: float64(len(left)),
		Want: "0 " + strings.Join(left, "; "), OK: len(left) == 0})
	r.Status = status(r.Checks)
	return nil
}

// firstTry is the evidence of a grade that was repeated.
type firstTry struct {
	Test   *accept.Measurement `json:"test"`
	Checks []accept.Check      `json:"checks"`
}

// regrade says whether a shaped grade earns one more try: only when every
// failed check is a latency bar. A flow-queueing qdisc can put the probe flow
// in a bulk flow's bucket (fq_codel: 1024 perturbed buckets), and a second
// try with new flows tells such bad luck from a bad configuration. It also
// covers an unexplained vdsl x nss pattern (lab/README.md); both tries are
// kept. A goodput failure is never retried, nor a backend the profile already
// records a limitation for; the doctor and leftover checks come after the
// grade and always count.
func regrade(cs []accept.Check, limitation string) bool {
	if limitation != "" || accept.Passed(cs) {
		return false
	}
	for _, c := range cs {
		if !c.OK && !c.Latency {
			return false
		}
	}
	return true
}

// doctorCheck fails on any finding of severity fail in `sqmkit doctor
// --json`, decoded with the doctor's own report type.
func doctorCheck(out string) accept.Check {
	c := accept.Check{Name: "doctor fail findings", Want: "0"}
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		c.Want = "0 (doctor printed no JSON report: " + err.Error() + ")"
		return c
	}
	var failed []string
	for _, f := range r.Findings {
		if f.Severity == doctor.Fail {
			failed = append(failed, f.ID+" "+f.Subject)
		}
	}
	c.Got, c.OK = float64(len(failed)), len(failed) == 0
	if len(failed) > 0 {
		c.Want += " (" + strings.Join(failed, "; ") + ")"
	}
	return c
}

func ifbs(sh *shell) []string {
	out, _ := sh.run(nsRouter, "ip", "-o", "link", "show", "type", "ifb")
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, strings.TrimSuffix(strings.SplitN(f[1], "@NONE", 2)[0], ":"))
		}
	}
	return names
}

// leftovers lists what stop left behind: qdisc lines not in the baseline
// and new IFBs (nss keeps its IFB by design, without a qdisc of its own).
func leftovers(before, after string, ifbBefore, ifbAfter []string, keepIFB bool) []string {
	base := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		base[strings.TrimSpace(l)] = true
	}
	kept := map[string]bool{}
	var left []string
	for _, name := range ifbAfter {
		if !slices.Contains(ifbBefore, name) {
			if keepIFB {
				kept[name] = true
				continue
			}
			left = append(left, "IFB "+name)
		}
	}
	for _, l := range strings.Split(after, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || base[l] {
			continue
		}
		// A kept IFB may hold only the kernel's default root (handle 0:).
		if f := strings.Fields(l); len(f) > 4 && f[2] == "0:" && kept[f[4]] {
			continue
		}
		left = append(left, l)
	}
	return left
}

func summaryLine(r *result) string {
	if r.Error != "" {
		return ": " + r.Error
	}
	var b strings.Builder
	if r.FirstTry != nil {
		fmt.Fprintf(&b, " (second try; first missed %s)", failedNames(r.FirstTry.Checks))
	}
	if r.Test != nil {
		fmt.Fprintf(&b, " grade %s (%s)", r.Test.Grade, r.Test.Tool)
		for _, p := range r.Test.Phases {
			fmt.Fprintf(&b, " | %s +%.1f/+%.1f ms", p.Name, p.AddedMedian, p.AddedP95)
			if p.AddedP95First != nil {
				fmt.Fprintf(&b, " (first 10 s p95 +%.1f)", *p.AddedP95First)
			}
			fmt.Fprintf(&b, " %.1f/%.1f Mbit/s", p.DownMbps, p.UpMbps)
		}
	}
	for _, c := range r.Checks {
		if !c.OK {
			b.WriteString("\n    " + c.String())
		}
	}
	return b.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func failedNames(cs []accept.Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, fmt.Sprintf("%s %.1f", c.Name, c.Got))
		}
	}
	return strings.Join(out, ", ")
}
