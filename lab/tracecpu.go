package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/lab/internal/procevents"
)

// A trace run's CPU figure: the controller's process tree from /proc,
// split by command and by user space and kernel (lab/README.md, "Capacity
// traces").

// cpuTime is CPU seconds in user space and in the kernel.
type cpuTime struct{ User, Sys float64 }

// treeCPU is the CPU seconds of a controller's live processes and of the
// children they reaped, by command name.
func treeCPU(t *procevents.Tree) map[string]cpuTime {
	by := map[string]cpuTime{}
	if t == nil {
		return by
	}
	for _, pid := range t.Pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if comm, c, ok := statCPU(string(b)); ok {
			sum := by[comm]
			sum.User += c.User
			sum.Sys += c.Sys
			by[comm] = sum
		}
	}
	return by
}

// statCPU reads one /proc/PID/stat: "pid (comm) state ...", where utime,
// stime, cutime and cstime are the 14th..17th fields, the 12th..15th after
// comm (which may hold spaces and parentheses itself).
func statCPU(s string) (comm string, c cpuTime, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", c, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return "", c, false
	}
	var v [4]float64
	for i, field := range f[11:15] {
		n, err := strconv.ParseFloat(field, 64)
		if err != nil {
			return "", c, false
		}
		v[i] = n / clockTicks
	}
	return s[open+1 : end], cpuTime{User: v[0] + v[2], Sys: v[1] + v[3]}, true
}

// cpuUse is what the tree used between two readings, scaled by perHour:
// in all, by command (those that used any), and the kernel's share of it.
func cpuUse(before, after map[string]cpuTime, perHour float64) (total float64, by map[string]float64, kernelShare float64) {
	by = map[string]float64{}
	kernel := 0.0
	for comm, c := range after {
		b := before[comm]
		if v := (c.User + c.Sys - b.User - b.Sys) * perHour; v > 0 {
			by[comm] = v
			total += v
			kernel += (c.Sys - b.Sys) * perHour
		}
	}
	if total > 0 {
		kernelShare = kernel / total
	}
	return total, by, kernelShare
}

// cpuSplit is " (a 250, b 40)": the three commands that cost most, when
// there is more than one.
func cpuSplit(by map[string]float64) string {
	if len(by) < 2 {
		return ""
	}
	comms := make([]string, 0, len(by))
	for c := range by {
		comms = append(comms, c)
	}
	sort.Slice(comms, func(i, j int) bool {
		return by[comms[i]] > by[comms[j]] || by[comms[i]] == by[comms[j]] && comms[i] < comms[j]
	})
	var parts []string
	for _, c := range comms[:min(3, len(comms))] {
		parts = append(parts, fmt.Sprintf("%s %.0f", c, by[c]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// clockTicks is USER_HZ, which is 100 on every Linux architecture.
const clockTicks = 100
