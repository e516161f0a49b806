package rpcd

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/tcstats"
	"github.com/sqmkit/sqmkit/internal/watch"
)

// queueStatus is one queue as the status page shows it.
type queueStatus struct {
	Section   string      `json:"section"`
	Interface string      `json:"interface"`
	Backend   string      `json:"backend"`
	Download  int         `json:"download_kbit"`
	Upload    int         `json:"upload_kbit"`
	UseMQ     bool        `json:"use_mq"`
	Autorate  bool        `json:"autorate"`
	Shaped    bool        `json:"shaped"` // shaped as planned (status)
	Error     string      `json:"error,omitempty"`
	Diffs     []string    `json:"diffs"`
	Dirs      []dirStatus `json:"directions"`
	Warnings  []string    `json:"warnings"` // rates that look like a unit slip
}

// dirStatus is one planned direction: where it is shaped, and the root
// the kernel holds there.
type dirStatus struct {
	Direction string `json:"direction"`
	Device    string `json:"device"`
	Planned   string `json:"planned"` // the plan's root kind
	Root      string `json:"root"`    // the kernel's, "" when none
	RateKbit  int    `json:"rate_kbit"`
}

// status is `sqmkit status` for every enabled queue.
func (e *Env) status(map[string]any) (any, error) {
	recovered := e.recover()
	ts, bad, err := e.queues()
	if err != nil {
		return nil, err
	}
	out := []queueStatus{}
	if bad != nil {
		for i, s := range bad.Sections {
			out = append(out, queueStatus{Section: s, Error: bad.Errs[i].Error(), Diffs: []string{}, Dirs: []dirStatus{}, Warnings: []string{}})
		}
	}
	for i, st := range apply.Inspect(ts, e.Opts) {
		q := ts[i].Queue
		qs := queueStatus{Section: q.Section, Interface: q.Interface, Backend: string(q.Backend), Download: q.Download, Upload: q.Upload,
			UseMQ: q.UseMQ, Autorate: q.Autorate, Shaped: st.Matches(), Diffs: []string{}, Dirs: []dirStatus{}, Warnings: append([]string{}, q.RateWarnings()...)}
		if st.Err != nil {
			qs.Error = st.Err.Error()
		}
		for _, d := range st.Diffs {
			qs.Diffs = append(qs.Diffs, d.String())
		}
		if st.Plan != nil {
			for _, d := range st.Plan.Dirs {
				ds := dirStatus{Direction: d.Direction.String(), Device: d.Device, Planned: d.Tree[0].Kind, RateKbit: d.RateKbit}
				if st.Live != nil {
					if r := st.Live.Root(d.Device); r != nil && !r.IsDefault() {
						ds.Root = r.Kind
					}
					if k, ok := drift.Rate(d, st.Live); ok {
						ds.RateKbit = k
					}
				}
				qs.Dirs = append(qs.Dirs, ds)
			}
		}
		out = append(out, qs)
	}
	return map[string]any{"queues": out, "jobs": e.running(), "recovered": recovered, "history": e.history(ts)}, nil
}

// queueHistory is what the router keeps of a queue across reboots, as the
// status page shows it: its grades over time, the rates tune wrote, the
// CPU's ceiling, and the watch's findings (its live ones while it runs).
type queueHistory struct {
	Grades   []history.Entry   `json:"grades"`
	Tuned    *history.Tuned    `json:"tuned,omitempty"`
	Ceiling  float64           `json:"ceiling_mbps,omitempty"`
	Findings []history.Finding `json:"findings"`
	Watching bool              `json:"watching"` // the watch's live state is fresh
}

// history reads the router's record for each queue of ts.
func (e *Env) history(ts []apply.Target) map[string]queueHistory {
	h, _ := history.Load(e.Root)
	out := map[string]queueHistory{}
	for _, t := range ts {
		s := t.Queue.Section
		qh := queueHistory{Grades: []history.Entry{}, Findings: []history.Finding{}}
		if q := h.Queues[s]; q != nil {
			qh.Grades, qh.Tuned = append(qh.Grades, q.Grades...), q.Tuned
			qh.Findings = append(qh.Findings, q.Findings...)
		}
		if r, ok := cpuload.Load(e.Root, s); ok {
			qh.Ceiling = r.Ceiling()
		}
		var st watch.Status
		if readJSON(watch.StatusPath(e.Root, s), &st) == nil && e.Now().Sub(st.At) < 3*time.Minute {
			qh.Findings, qh.Watching = append([]history.Finding{}, st.Findings...), true
		}
		out[s] = qh
	}
	return out
}

// devCounters are one shaped device's root counters, totals since the
// qdisc was created; the page turns two samples into rates.
type devCounters struct {
	Direction      string `json:"direction"`
	Section        string `json:"section"`
	Root           string `json:"root"`
	Bytes          uint64 `json:"bytes"`
	Packets        uint64 `json:"packets"`
	Drops          uint64 `json:"drops"`
	Marks          uint64 `json:"ecn_marks"`
	BacklogBytes   uint64 `json:"backlog_bytes"`
	BacklogPackets uint64 `json:"backlog_packets"`
}

// counters reads every enabled queue's shaped devices once.
func (e *Env) counters(map[string]any) (any, error) {
	ts, _, err := e.queues()
	if err != nil {
		return nil, err
	}
	out := map[string]devCounters{}
	for i, st := range apply.Inspect(ts, e.Opts) {
		if st.Plan == nil || st.Live == nil {
			continue
		}
		for _, d := range st.Plan.Dirs {
			r := st.Live.Root(d.Device)
			if r == nil || r.IsDefault() {
				continue
			}
			c := devCounters{Direction: d.Direction.String(), Section: ts[i].Queue.Section, Root: r.Kind, Bytes: r.Stats.Bytes,
				Packets: r.Stats.Packets, Drops: r.Stats.Dropped, BacklogBytes: r.Stats.BacklogBytes, BacklogPackets: r.Stats.BacklogPackets}
			for _, rec := range st.Live.Of(d.Device) {
				c.Marks += marks(rec)
			}
			out[d.Device] = c
		}
	}
	return map[string]any{"at_ms": e.Now().UnixMilli(), "devices": out}, nil
}

// marks are the ECN marks a qdisc counted: fq_codel's ecn_mark, cake's
// marks row (one column per tin).
func marks(r *tcstats.Record) uint64 {
	var n uint64
	for _, c := range r.Counters {
		if c.Key == "ecn_mark" {
			v, _ := strconv.ParseUint(c.Value, 10, 64)
			n += v
		}
	}
	if !tcstats.IsCake(r.Kind) || r.Kind == "cake_mq" {
		return n // a cake_mq root's instances count its marks
	}
	for _, l := range r.Lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "marks" {
			continue
		}
		for _, v := range f[1:] {
			m, _ := strconv.ParseUint(v, 10, 64)
			n += m
		}
	}
	return n
}

// doctor is `sqmkit doctor` on the enabled queues, findings worst first.
func (e *Env) doctor(map[string]any) (any, error) {
	if err := e.readable(); err != nil {
		return nil, err
	}
	run := e.Doctor
	if run == nil {
		run = doctor.Run
	}
	d, err := run(doctor.Options{Root: e.Root, File: e.File, Read: e.Opts.Kernel.Read, RateDir: e.Opts.RateDir, Web: true})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(d.Findings, func(a, b doctor.Finding) int { return cmp.Compare(b.Severity, a.Severity) })
	return d, nil
}
