package autorate

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
)

// Metrics are the daemon's figures in Prometheus' text format. The
// endpoint is a few lines over a TCP listener rather than net/http,
// which would add about 1.5 MB to the router build for one GET.
type Metrics struct {
	// CPU reads the queue's last CPU measurement (cpuload.Load); nil or
	// none: no CPU figures.
	CPU func() (cpuload.Record, bool)

	mu      sync.Mutex
	rate    [2]int
	load    [2]int
	state   [2]State
	added   map[string]float64 // latest added delay per path
	base    map[string]float64
	changes int
	failed  atomic.Int64
	samples atomic.Int64
}

func (m *Metrics) sample(r Raw, added float64) {
	m.samples.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.added == nil {
		m.added, m.base = map[string]float64{}, map[string]float64{}
	}
	m.added[r.Path] = added
	m.base[r.Path] = r.Ms - added
}

func (m *Metrics) update(c *Controller, load [2]int, changes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range 2 {
		m.rate[d], m.load[d], m.state[d] = c.Rate(config.Direction(d)), load[d], c.State(config.Direction(d))
	}
	m.changes = changes
}

// Write renders the metrics.
func (m *Metrics) Write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	gauge := func(name, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name) }
	// base units, as Prometheus' naming rules ask (promtool check
	// metrics): bits per second and seconds (TestMetricsBaseUnits)
	gauge("sqmkit_autorate_rate_bits_per_second", "shaper rate set by autorate")
	for d := range 2 {
		fmt.Fprintf(&b, "sqmkit_autorate_rate_bits_per_second{direction=%s} %d\n", Label(config.Direction(d)), m.rate[d]*1000)
	}
	gauge("sqmkit_autorate_load_bits_per_second", "traffic the shaper carried in the last interval")
	for d := range 2 {
		fmt.Fprintf(&b, "sqmkit_autorate_load_bits_per_second{direction=%s} %d\n", Label(config.Direction(d)), m.load[d]*1000)
	}
	gauge("sqmkit_autorate_state", "1 for the state each direction is in")
	for d := range 2 {
		for _, s := range []State{Idle, Steady, Loaded, Bloated, Stalled} {
			v := 0
			if m.state[d] == s {
				v = 1
			}
			fmt.Fprintf(&b, "sqmkit_autorate_state{direction=%s,state=%s} %d\n", Label(config.Direction(d)), Label(s), v)
		}
	}
	gauge("sqmkit_autorate_added_delay_seconds", "latest probe's delay above its path's baseline")
	for p, v := range m.added {
		fmt.Fprintf(&b, "sqmkit_autorate_added_delay_seconds{path=%s} %.5f\n", Label(p), v/1000)
	}
	gauge("sqmkit_autorate_baseline_seconds", "each probe path's delay without a queue")
	for p, v := range m.base {
		fmt.Fprintf(&b, "sqmkit_autorate_baseline_seconds{path=%s} %.5f\n", Label(p), v/1000)
	}
	if m.CPU != nil {
		if r, ok := m.CPU(); ok {
			writeCPU(&b, gauge, r)
		}
	}
	fmt.Fprintf(&b, "# HELP sqmkit_autorate_changes_total rate changes made\n# TYPE sqmkit_autorate_changes_total counter\nsqmkit_autorate_changes_total %d\n", m.changes)
	fmt.Fprintf(&b, "# HELP sqmkit_autorate_change_failures_total rate changes the kernel refused\n# TYPE sqmkit_autorate_change_failures_total counter\nsqmkit_autorate_change_failures_total %d\n", m.failed.Load())
	fmt.Fprintf(&b, "# HELP sqmkit_autorate_samples_total delay samples received\n# TYPE sqmkit_autorate_samples_total counter\nsqmkit_autorate_samples_total %d\n", m.samples.Load())
	io.WriteString(w, b.String())
}

// writeCPU renders what the last test or tune measured of the router's CPU,
// per phase (TestMetricsBaseUnits).
func writeCPU(b *strings.Builder, gauge func(name, help string), r cpuload.Record) {
	gauge("sqmkit_cpu_ceiling_bits_per_second", "rate at which the router's busiest core (or all) would be saturated, from the last test or tune")
	for _, c := range r.Phases {
		fmt.Fprintf(b, "sqmkit_cpu_ceiling_bits_per_second{phase=%s,qdisc=%s} %.0f\n", Label(c.Phase), Label(r.Qdisc), c.CeilingMbps*1e6)
	}
	gauge("sqmkit_cpu_seconds_per_bit", "CPU time spent per shaped bit, the test's own process left out")
	for _, c := range r.Phases {
		fmt.Fprintf(b, "sqmkit_cpu_seconds_per_bit{phase=%s,qdisc=%s} %.3g\n", Label(c.Phase), Label(r.Qdisc), c.MsPerMbit*1e-9)
	}
	gauge("sqmkit_cpu_busiest_core_ratio", "share of the phase its busiest core ran")
	for _, c := range r.Phases {
		fmt.Fprintf(b, "sqmkit_cpu_busiest_core_ratio{phase=%s,cpu=\"%d\"} %.3f\n", Label(c.Phase), c.Busiest, c.BusiestShare)
	}
	gauge("sqmkit_cpu_measured_timestamp_seconds", "when the CPU figures were measured")
	fmt.Fprintf(b, "sqmkit_cpu_measured_timestamp_seconds %d\n", r.At.Unix())
}

// labelEscaper escapes a label value as Prometheus' text format reads
// it: a backslash, a double quote and a newline, nothing else (Go's %q
// escapes a tab or a control byte in ways the format refuses;
// TestMetricsParseAsPrometheus).
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Label is v as a quoted Prometheus label value.
func Label(v any) string { return `"` + labelEscaper.Replace(fmt.Sprint(v)) + `"` }

// Serve answers every HTTP request on l with the metrics, until l closes.
func (m *Metrics) Serve(l net.Listener) error { return ServeText(l, m.Write) }

// ServeText answers every HTTP request on l with what write writes (a
// Prometheus text page; the watch's too), until l closes.
func ServeText(l net.Listener, write func(io.Writer)) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			// the request line and headers, up to the blank line
			for {
				l, err := br.ReadString('\n')
				if err != nil || strings.TrimSpace(l) == "" {
					break
				}
			}
			var body strings.Builder
			write(&body)
			fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s", body.Len(), body.String())
		}()
	}
}
