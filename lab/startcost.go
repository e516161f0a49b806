package main

import (
	"fmt"
	"os"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/procevents"
)

// startCost is what starting a backend costs on the router, measured the
// same way for every backend.
type startCost struct {
	// First is the first start of the boot: the router's programs freshly
	// installed and the guest's page cache dropped, so every binary and
	// library is read and translated again, as after a router's boot.
	First cost `json:"first"`
	// Warm is a start right after a stop, with everything cached: what a
	// hotplug event or a rate change pays.
	Warm cost `json:"warm"`
	// One process of each kind in this guest, for scale: the router build
	// of sqmkit doing nothing (`sqmkit version`) and one `tc -V`.
	GoProcess cost `json:"go_process"`
	TCProcess cost `json:"tc_process"`
}

// cost of one command. Processes and Execs come from the kernel's process
// events (lab/internal/procevents): every process of the command's tree,
// the command included, and every program it ran; `ip netns exec`, which
// execs the command in its own process, is not counted. -1 when the guest
// kernel has no process events.
type cost struct {
	WallMs float64 `json:"wall_ms"`
	// CPUMs is user+system time of the command and every descendant it
	// waited for (wait4's rusage).
	CPUMs     float64 `json:"cpu_ms"`
	Processes int     `json:"processes"`
	Execs     int     `json:"execs"`
}

func (c cost) String() string {
	s := fmt.Sprintf("%.0f ms (CPU %.0f ms", c.WallMs, c.CPUMs)
	if c.Processes >= 0 {
		s += fmt.Sprintf(", %d processes, %d execs", c.Processes, c.Execs)
	}
	return s + ")"
}

// measure runs a command in ns and returns what it cost.
func (g *guest) measure(sh *shell, ns string, args ...string) (string, cost, error) {
	if g.events != nil {
		g.events.Begin()
	}
	t0 := time.Now()
	out, ps, err := sh.exec(ns, "", args...)
	c := cost{WallMs: float64(time.Since(t0).Microseconds()) / 1000, Processes: -1, Execs: -1}
	if ps != nil {
		c.CPUMs = float64((ps.UserTime() + ps.SystemTime()).Microseconds()) / 1000
	}
	if g.events != nil {
		n := g.events.End()
		c.Processes, c.Execs = n.Processes, n.Execs
		if ns != "" {
			c.Execs-- // ip netns exec
		}
	}
	return out, c, err
}

// listenProcesses subscribes to process events for the guest's lifetime;
// without them start costs carry no process counts.
func listenProcesses(say func(string, ...any)) *procevents.Watcher {
	w, err := procevents.Listen()
	if err != nil {
		say("no process counts in start costs: %v", err)
		return nil
	}
	return w
}

// dropCaches empties the guest's page cache, as a reboot would.
func dropCaches() error {
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}
