// Package cpuload measures what shaping costs the router's CPU: each
// core's time from /proc/stat and where the network softirqs ran from
// /proc/softirqs, set beside the throughput shaped meanwhile, and the
// ceiling that implies (docs/design.md, "What the router's CPU can shape").
package cpuload

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Core is one CPU's time since boot, in clock ticks.
type Core struct {
	Busy, Softirq, Total uint64
}

// Sample is the CPU counters at one moment.
type Sample struct {
	At    time.Time
	Cores []Core
	NetRx []uint64 // NET_RX softirqs per CPU
	NetTx []uint64 // NET_TX softirqs per CPU
	IRQ   []uint64 // interrupts per CPU of the lines that name the device
	// Self is this process's own CPU time (its threads and reaped
	// children), in ticks: the test's client is not what shapes.
	Self uint64
}

// Read reads the counters under root (its proc/stat, proc/softirqs,
// proc/interrupts for dev's lines, and proc/self/stat).
func Read(root, dev string) (Sample, error) {
	s := Sample{At: time.Now()}
	b, err := os.ReadFile(filepath.Join(root, "proc/stat"))
	if err != nil {
		return s, err
	}
	if s.Cores, err = parseStat(b); err != nil {
		return s, err
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/softirqs")); err == nil {
		s.NetRx, s.NetTx = parseSoftirq(b, "NET_RX:"), parseSoftirq(b, "NET_TX:")
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/interrupts")); err == nil && dev != "" {
		s.IRQ = parseIRQ(b, dev)
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/stat")); err == nil {
		s.Self = parseSelf(b)
	}
	return s, nil
}

// parseStat reads the per-CPU lines (cpu0, cpu1, ...) of /proc/stat:
// user nice system idle iowait irq softirq steal. Busy is everything but
// idle, iowait and steal (time the core was not ours to run).
func parseStat(b []byte) ([]Core, error) {
	var out []Core
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat: %s: %v", f[0], err)
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		out = append(out, Core{Busy: user + nice + system + irq + softirq, Softirq: softirq, Total: user + nice + system + idle + iowait + irq + softirq + steal})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("/proc/stat has no per-CPU lines")
	}
	return out, nil
}

// parseSoftirq reads one row (e.g. "NET_RX:") of /proc/softirqs.
func parseSoftirq(b []byte, row string) []uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != row {
			continue
		}
		out := make([]uint64, 0, len(f)-1)
		for _, x := range f[1:] {
			n, _ := strconv.ParseUint(x, 10, 64)
			out = append(out, n)
		}
		return out
	}
	return nil
}

// parseIRQ sums, per CPU, the /proc/interrupts lines whose action names
// dev: "eth0", "eth0-rx-0", "eth0-TxRx-1" (a name followed by '-' or the
// end), as drivers name their queues' vectors.
func parseIRQ(b []byte, dev string) []uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return nil
	}
	n := len(strings.Fields(sc.Text())) // the header: CPU0 CPU1 ...
	out := make([]uint64, n)
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < n+2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		named := false
		for _, w := range f[n+1:] {
			named = named || w == dev || strings.HasPrefix(w, dev+"-")
		}
		if !named {
			continue
		}
		found = true
		for i := range n {
			v, _ := strconv.ParseUint(f[1+i], 10, 64)
			out[i] += v
		}
	}
	if !found {
		return nil
	}
	return out
}

// parseSelf is utime+stime+cutime+cstime of /proc/self/stat (fields 14-17;
// the command name, field 2, may hold spaces and is skipped by its ')').
func parseSelf(b []byte) uint64 {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3]
	if len(f) < 15 {
		return 0
	}
	var sum uint64
	for n := 14; n <= 17; n++ {
		v, _ := strconv.ParseInt(f[n-3], 10, 64)
		sum += uint64(max(v, 0))
	}
	return sum
}

// RPS reads the receive packet steering masks of dev's queues under root
// (sys/class/net/DEV/queues/rx-*/rps_cpus): "" when every mask is zero or
// none can be read (steering off), else the masks joined by commas.
func RPS(root, dev string) string { return masks(root, dev, "rx-*/rps_cpus") }

// XPS is RPS for the transmit queues' steering (tx-*/xps_cpus).
func XPS(root, dev string) string { return masks(root, dev, "tx-*/xps_cpus") }

func masks(root, dev, glob string) string {
	paths, _ := filepath.Glob(filepath.Join(root, "sys/class/net", dev, "queues", glob))
	var masks []string
	on := false
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		m := strings.TrimSpace(string(b))
		masks = append(masks, m)
		if strings.Trim(m, "0,") != "" {
			on = true
		}
	}
	if !on {
		return ""
	}
	return strings.Join(masks, ",")
}
