// Package noise measures how much of the time the host kept the lab's
// emulated CPUs from running, while the lab measures latency. The guest is
// emulated (TCG): when the host does not run a vCPU thread, every packet
// that vCPU should forward waits, and a latency test reads the host's load
// as bufferbloat.
//
// What it measures is steal time, computed the way KVM computes it for a
// guest: the run_delay of each vCPU thread (/proc/PID/task/TID/schedstat,
// the time the thread was runnable but waited for a host CPU). TCG offers
// the guest no steal clock, so /proc/stat's steal column stays 0 in the
// guest however busy the host is. The host reads it, costing the guest
// nothing: a timer loop inside the guest (this package's first version)
// woke each vCPU 500 times a second, and that alone added about 2 ms to
// the lab's median latency under load (cable × cake, bidirectional +7.0 ms
// with it, +4.6 ms without, one host, one hour).
//
// Sample (host) writes, per vCPU, one float32 per Period: the milliseconds
// of that period the vCPU waited. The files are in the results directory,
// which the guest mounts without caching; Open (guest) reads them.
package noise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Period between samples: long enough that reading two small procfs files
// costs the host nothing measurable, short enough to resolve the stalls
// that matter against 5 ms latency bars.
const Period = 10 * time.Millisecond

// StallMs is the steal within one Period that counts as a stall: a tenth
// of the period, a fifth of the lab's 5 ms latency bar.
const StallMs = 1.0

const (
	startFile   = "start"   // "<host wall unix ns of sample 0> <host CPUs>"
	clockFile   = "clock"   // the host's wall clock, rewritten every Period
	foreignFile = "foreign" // other processes' CPU ms per Period
	busyFile    = "busy"    // the vCPU threads' run time, ms per Period, summed
	busiestFile = "busiest" // the busiest vCPU thread's run time, ms per Period
)

// vcpuName is what QEMU names a vCPU thread with -name debug-threads=on.
var vcpuName = regexp.MustCompile(`^CPU (\d+)/(TCG|KVM)$`)

// Source is what Sample reads: cumulative counters, in ns.
type Source interface {
	VCPUs() int
	// Sched is vCPU cpu's time running and its time runnable but not
	// running.
	Sched(cpu int) (run, delay int64, err error)
	// Foreign is the CPU time every other process on the host used.
	Foreign() (int64, error)
}

// QEMU is the Source of a running qemu process.
type QEMU struct {
	pid  int
	tids []int // by vCPU number
}

// NewQEMU finds the vCPU threads of qemu process pid.
func NewQEMU(pid int) (*QEMU, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		return nil, err
	}
	byCPU := map[int]int{}
	for _, t := range tasks {
		comm, err := os.ReadFile(filepath.Join(t, "comm"))
		if err != nil {
			continue
		}
		m := vcpuName.FindStringSubmatch(strings.TrimSpace(string(comm)))
		if m == nil {
			continue
		}
		cpu, _ := strconv.Atoi(m[1])
		tid, _ := strconv.Atoi(filepath.Base(t))
		byCPU[cpu] = tid
	}
	if len(byCPU) == 0 {
		return nil, fmt.Errorf("process %d has no thread named like a vCPU (qemu needs -name ...,debug-threads=on)", pid)
	}
	q := &QEMU{pid: pid, tids: make([]int, len(byCPU))}
	for cpu, tid := range byCPU {
		if cpu >= len(q.tids) {
			return nil, fmt.Errorf("process %d: vCPU threads %v are not numbered 0..%d", pid, byCPU, len(q.tids)-1)
		}
		q.tids[cpu] = tid
	}
	return q, nil
}

// VCPUs is the number of vCPU threads.
func (q *QEMU) VCPUs() int { return len(q.tids) }

// Sched reads the vCPU thread's schedstat: its run time and run_delay.
// A TCG vCPU thread sleeps while its vCPU halts, so its run time is the
// time the guest kept that CPU busy (plus emulation's own overhead).
func (q *QEMU) Sched(cpu int) (run, delay int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", q.pid, q.tids[cpu]))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("schedstat of %d: %q", q.tids[cpu], b)
	}
	if run, err = strconv.ParseInt(f[0], 10, 64); err == nil {
		delay, err = strconv.ParseInt(f[1], 10, 64)
	}
	return run, delay, err
}

// clockTick is USER_HZ, the unit of /proc/stat and /proc/PID/stat: 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// Foreign is the host's busy time (/proc/stat: user, nice, system, irq,
// softirq, steal) minus qemu's own (utime + stime of /proc/PID/stat).
func (q *QEMU) Foreign() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	busy, err := hostBusy(string(b))
	if err != nil {
		return 0, err
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", q.pid))
	if err != nil {
		return 0, err
	}
	// the fields after the command name, which may hold spaces
	_, rest, ok := strings.Cut(string(st), ") ")
	g := strings.Fields(rest)
	if !ok || len(g) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", q.pid, st)
	}
	ut, _ := strconv.ParseInt(g[11], 10, 64)
	stime, _ := strconv.ParseInt(g[12], 10, 64)
	return (busy - ut - stime) * int64(clockTick), nil
}

// hostBusy sums /proc/stat's first line in ticks: the time the host's CPUs
// ran anything, plus the time its own hypervisor ran something else
// (steal). When the host is itself a virtual machine (a CI runner), its
// neighbours take CPU from qemu's threads without any process here using
// it; the vCPUs' run_delay does not see that either, so only the steal
// column tells the gate (a CI run graded cable × cake at +31.7 ms while the
// scenarios before and after it were calm).
func hostBusy(stat string) (int64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: %q", line)
	}
	fields := []int{1, 2, 3, 6, 7}
	if len(f) > 8 { // steal: Linux 2.6.11 on
		fields = append(fields, 8)
	}
	var busy int64
	for _, i := range fields {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %v", i, line, err)
		}
		busy += v
	}
	return busy, nil
}

// Sample records src until stop is closed, every Period: per vCPU the ms
// of run_delay, (file "busy") the ms the vCPUs ran, and (file "foreign")
// the ms of CPU other processes used. It returns at once on a setup
// error, else when stopped or when a read fails (the VM is gone).
//
// Sample k is the period starting at start+k×Period on the host's clock,
// however late the sampler runs: a ticker drops ticks on a busy host, and
// counting ticks put the samples ever further behind the clock (a loaded
// run lagged 59 s in 45 minutes, so the reader's windows found no samples
// and graded phases as quiet). A reading that comes late covers every
// period since the last one: its growth is spread evenly over them.
func Sample(dir string, src Source, stop <-chan struct{}) error {
	return sample(dir, src, stop, time.Now)
}

func sample(dir string, src Source, stop <-chan struct{}, now func() time.Time) error {
	cpus := src.VCPUs()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := make([]*os.File, cpus)
	last, lastRun := make([]int64, cpus), make([]int64, cpus)
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu%d", i)))
		if err != nil {
			return err
		}
		defer f.Close()
		files[i] = f
		if lastRun[i], last[i], err = src.Sched(i); err != nil {
			return err
		}
	}
	busy, err := os.Create(filepath.Join(dir, busyFile))
	if err != nil {
		return err
	}
	defer busy.Close()
	busiest, err := os.Create(filepath.Join(dir, busiestFile))
	if err != nil {
		return err
	}
	defer busiest.Close()
	foreign, err := os.Create(filepath.Join(dir, foreignFile))
	if err != nil {
		return err
	}
	defer foreign.Close()
	lastForeign, err := src.Foreign()
	if err != nil {
		return err
	}
	clock, err := os.Create(filepath.Join(dir, clockFile))
	if err != nil {
		return err
	}
	defer clock.Close()
	start := now()
	if err := os.WriteFile(filepath.Join(dir, startFile), fmt.Appendf(nil, "%d %d\n", start.UnixNano(), runtime.NumCPU()), 0o644); err != nil {
		return err
	}
	// put writes samples from..k, ns spread evenly over them
	var from, k int64
	put := func(f *os.File, ns int64) error {
		buf := make([]byte, 4*(k-from+1))
		v := math.Float32bits(float32(ns) / float32(k-from+1) / 1e6)
		for i := 0; i < len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], v)
		}
		_, err := f.WriteAt(buf, from*4)
		return err
	}
	tick := time.NewTicker(Period)
	defer tick.Stop()
	for ; ; from = k + 1 {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		// the period this reading ends: its time is now's, not the tick's
		k = max(int64(now().Sub(start)/Period)-1, from)
		ran, most := int64(0), int64(0)
		for i, f := range files {
			run, delay, err := src.Sched(i)
			if err != nil {
				return nil // the VM exited
			}
			ran += run - lastRun[i]
			most = max(most, run-lastRun[i])
			if err := put(f, delay-last[i]); err != nil {
				return err
			}
			last[i], lastRun[i] = delay, run
		}
		if err := put(busy, ran); err != nil {
			return err
		}
		if err := put(busiest, most); err != nil {
			return err
		}
		v, err := src.Foreign()
		if err != nil {
			return nil
		}
		if err := put(foreign, v-lastForeign); err != nil {
			return err
		}
		lastForeign = v
		// fixed width, so a reader never sees a shorter number's tail
		if _, err := clock.WriteAt(fmt.Appendf(nil, "%020d", now().UnixNano()), 0); err != nil {
			return err
		}
	}
}

// Reader reads what Sample wrote, in the guest's time.
type Reader struct {
	dir      string
	start    time.Time // sample 0, on the reader's clock
	cpus     []string
	hostCPUs int
}

// Open waits (up to timeout) for Sample to run on dir, and measures the
// offset between the host's clock and this one: the guest's clock is set
// from the emulated RTC at boot, to the second at best.
func Open(dir string, timeout time.Duration) (*Reader, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(filepath.Join(dir, startFile))
		if err == nil {
			f := strings.Fields(string(b))
			var start, ncpu int64
			if len(f) == 2 {
				start, err = strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					ncpu, err = strconv.ParseInt(f[1], 10, 64)
				}
			}
			if len(f) != 2 || err != nil || ncpu < 1 {
				return nil, fmt.Errorf("noise: bad %s: %q", startFile, b)
			}
			off, err := offset(filepath.Join(dir, clockFile), deadline)
			if err != nil {
				return nil, err
			}
			cpus, _ := filepath.Glob(filepath.Join(dir, "cpu*"))
			sort.Strings(cpus)
			return &Reader{dir: dir, start: time.Unix(0, start).Add(-off), cpus: cpus, hostCPUs: int(ncpu)}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("noise: the host's sampler did not start within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// offset is host clock minus this clock: the clock file changes every
// Period, so the first change seen was written less than a read ago.
func offset(path string, deadline time.Time) (time.Duration, error) {
	var first string
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		now := time.Now()
		if err == nil && len(b) == 20 {
			if first == "" {
				first = string(b)
			} else if string(b) != first {
				host, err := strconv.ParseInt(string(b), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("noise: bad %s: %q", clockFile, b)
				}
				return time.Unix(0, host).Sub(now), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("noise: the host's sampler stopped (its clock file does not change)")
}

// Stats describe the steal in a window, over all vCPUs: per Period, the
// milliseconds a runnable vCPU waited for the host.
type Stats struct {
	Samples int     `json:"samples"` // vCPU × periods
	Steal   float64 `json:"steal"`   // the share of the window's vCPU time the host took
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
	// Stalled is the share of samples with more than StallMs stolen.
	Stalled float64 `json:"stalled"`
	// Foreign is the share of the host's CPU capacity that processes
	// other than qemu used in the window: the load the gate judges.
	Foreign float64 `json:"foreign"`
	// Busy is the share of the vCPUs' time they ran: near 1 the emulated
	// machine had no idle left, and queues grew behind its CPUs rather
	// than in any qdisc (the lab's link is too fast for this host).
	Busy float64 `json:"vcpus_busy"`
	// Busiest is the share of one vCPU's time the busiest vCPU of each
	// period ran: near 1 one emulated core was full (the product's
	// cpuload reads the same from inside the guest).
	Busiest float64 `json:"vcpu_busiest,omitempty"`
	// Missing is the share of the window's periods the sampler has not
	// written: a window it never saw tells nothing about the host.
	Missing float64 `json:"missing,omitempty"`
}

// Start is when the sampler's first sample was taken, on the reader's clock.
func (r *Reader) Start() time.Time { return r.start }

// Window returns the stats of the samples between from and to.
func (r *Reader) Window(from, to time.Time) (Stats, error) {
	per, err := r.read(from, to)
	if err != nil {
		return Stats{}, err
	}
	var v []float64
	for _, s := range per {
		v = append(v, s...)
	}
	st := summarize(v)
	if st.Foreign, err = r.share(foreignFile, from, to, r.hostCPUs); err != nil {
		return st, err
	}
	lo, hi := max(r.index(from), 0), r.index(to)
	if hi > lo {
		got, err := readSeries(filepath.Join(r.dir, foreignFile), lo, hi)
		if err != nil {
			return st, err
		}
		st.Missing = 1 - float64(len(got))/float64(hi-lo)
	}
	// a run from before the busy series existed has no file: Busy stays 0
	if _, err := os.Stat(filepath.Join(r.dir, busyFile)); err == nil {
		if st.Busy, err = r.share(busyFile, from, to, len(r.cpus)); err != nil {
			return st, err
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, busiestFile)); err == nil {
		st.Busiest, err = r.share(busiestFile, from, to, 1)
	}
	return st, err
}

// share is the mean of a series of ms per Period in the window, as a share
// of n CPUs' time.
func (r *Reader) share(file string, from, to time.Time, n int) (float64, error) {
	s, err := readSeries(filepath.Join(r.dir, file), max(r.index(from), 0), r.index(to))
	if err != nil || len(s) == 0 {
		return 0, err
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return sum / (float64(len(s)) * float64(Period) / 1e6 * float64(n)), nil
}

// read returns each vCPU's steal per sample from index(from) on, up to
// index(to) or as far as the sampler got.
func (r *Reader) read(from, to time.Time) ([][]float64, error) {
	lo, hi := max(r.index(from), 0), r.index(to)
	var out [][]float64
	for _, name := range r.cpus {
		s, err := readSeries(name, lo, hi)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// readSeries reads samples lo..hi (or as far as written) of one file.
func readSeries(name string, lo, hi int64) ([]float64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, max(hi-lo, 0)*4)
	n, _ := f.ReadAt(b, lo*4)
	s := make([]float64, n/4)
	for i := range s {
		s[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return s, nil
}

// PerCPU returns each vCPU's steal per sample between from and to, ms:
// the raw data behind Window, kept with the results.
func (r *Reader) PerCPU(from, to time.Time) ([][]float64, error) { return r.read(from, to) }

func (r *Reader) index(t time.Time) int64 { return int64(t.Sub(r.start) / Period) }

func summarize(v []float64) Stats {
	st := Stats{Samples: len(v)}
	if len(v) == 0 {
		return st
	}
	sort.Float64s(v)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	st.Steal = sum / (float64(len(v)) * float64(Period) / 1e6)
	st.P99, st.Max = v[int(0.99*float64(len(v)-1))], v[len(v)-1]
	n := len(v) - sort.SearchFloat64s(v, math.Nextafter(StallMs, math.Inf(1)))
	st.Stalled = float64(n) / float64(len(v))
	return st
}

// Series is the steal's time line for a plot: per bin, the worst vCPU's
// share of the bin stolen, with the bin's start in seconds since from.
func (r *Reader) Series(from, to time.Time, bin time.Duration) (t, worst []float64, err error) {
	per, err := r.read(from, to)
	if err != nil {
		return nil, nil, err
	}
	n := int(bin / Period)
	for lo := 0; ; lo += n {
		w, seen := 0.0, false
		for _, s := range per {
			part := s[min(lo, len(s)):min(lo+n, len(s))]
			sum := 0.0
			for _, x := range part {
				sum += x
			}
			if len(part) > 0 {
				w, seen = math.Max(w, sum/(float64(len(part))*float64(Period)/1e6)), true
			}
		}
		if !seen {
			return t, worst, nil
		}
		t = append(t, (time.Duration(lo) * Period).Seconds())
		worst = append(worst, w)
	}
}

// ForeignSeries is the share of the host's CPU other processes used, per
// bin of the window (the plot's second line).
func (r *Reader) ForeignSeries(from, to time.Time, bin time.Duration) ([]float64, error) {
	fg, err := readSeries(filepath.Join(r.dir, foreignFile), max(r.index(from), 0), r.index(to))
	if err != nil {
		return nil, err
	}
	n := int(bin / Period)
	var out []float64
	for lo := 0; lo < len(fg); lo += n {
		part := fg[lo:min(lo+n, len(fg))]
		sum := 0.0
		for _, x := range part {
			sum += x
		}
		out = append(out, sum/(float64(len(part))*float64(Period)/1e6*float64(r.hostCPUs)))
	}
	return out, nil
}
