package autorate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Shaper is the running queue's rates: apply.Follower.
type Shaper interface {
	Set(config.Rates) error
	Resync() (config.Rates, error)
	Rates() config.Rates
}

// Daemon is `sqmkit autorate`: it feeds the controller from a Source and
// the shaper's counters, and applies its decisions to the Shaper.
type Daemon struct {
	Shaper Shaper
	// Devices are the devices whose tx counters are each direction's
	// carried load: the IFB for the download, the WAN device for the
	// upload (what the shaper let through).
	Devices [2]string
	Root    string // /sys is read under it
	Params  Params
	Source  Source
	Log     func(string)
	Metrics *Metrics
	// Summary is the period of the summary log line (0: 60 s).
	Summary time.Duration
	// Sleep is how long both directions stay idle before the ticks
	// (probes and decisions) slow to one per SleepProbe (0: 30 s, 1 s).
	Sleep, SleepProbe time.Duration
	// Probe is the tick, one probe each, while awake (0: 50 ms);
	// decisions run every Params.Interval of ticks.
	Probe time.Duration
}

func (d *Daemon) log(format string, a ...any) {
	if d.Log != nil {
		d.Log(fmt.Sprintf(format, a...))
	}
}

// counter is one device's tx_bytes, kept open: a read is one raw pread
// (sysfs renders the value again at offset 0; rawsys.go). The device's
// ifindex is read when the file is opened and then every checkEvery
// reads: a device that went away fails the read, one re-created between
// two reads (a PPPoE reconnect) has a new ifindex.
type counter struct {
	path  string // the device's /sys/class/net directory
	fd    int    // -1: closed
	index int
	reads int
	buf   [32]byte
}

const checkEvery = 10

func (c *counter) read() (bytes uint64, ifindex int, err error) {
	if c.fd >= 0 && c.reads%checkEvery == 0 {
		if idx, err := readInt(filepath.Join(c.path, "ifindex")); err != nil || idx != c.index {
			c.close()
		}
	}
	c.reads++
	if c.fd < 0 {
		if c.index, err = readInt(filepath.Join(c.path, "ifindex")); err != nil {
			return 0, 0, err
		}
		p := filepath.Join(c.path, "statistics/tx_bytes")
		if c.fd, err = syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
			c.fd = -1
			return 0, 0, &os.PathError{Op: "open", Path: p, Err: err}
		}
	}
	n, err := rawPread0(c.fd, c.buf[:])
	if err == nil {
		bytes, err = strconv.ParseUint(strings.TrimSpace(string(c.buf[:n])), 10, 64)
	}
	if err != nil {
		c.close()
		return 0, 0, err
	}
	return bytes, c.index, nil
}

func (c *counter) close() {
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
	}
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Run follows the link until ctx ends; it then leaves the shaper at the
// base rates (the configured ones).
func (d *Daemon) Run(ctx context.Context) error {
	p := d.Params
	if d.Summary == 0 {
		d.Summary = time.Minute
	}
	if d.Sleep == 0 {
		d.Sleep, d.SleepProbe = 30*time.Second, time.Second
	}
	if d.Probe == 0 {
		d.Probe = fastProbe
	}
	if d.Metrics == nil {
		d.Metrics = &Metrics{}
	}
	now := time.Now()
	c, err := New(p, now)
	if err != nil {
		return err
	}
	// start at the base rates: the controller's first belief
	if err := d.Shaper.Set(config.Rates{Download: p.Base[Down], Upload: p.Base[Up]}); err != nil {
		return fmt.Errorf("setting the base rates: %w", err)
	}
	sctx, stopSource := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- d.Source.Run(sctx) }()
	defer func() {
		stopSource()
		<-srcDone
	}()

	var counters [2]*counter
	for dir, dev := range d.Devices {
		counters[dir] = &counter{path: filepath.Join(d.Root, "sys/class/net", dev), fd: -1}
		defer counters[dir].close()
	}
	baselines := map[string]*Baseline{}
	var last [2]uint64
	var ifindex [2]int
	lastRead := now
	stale := true   // the counters' previous values are not usable
	resync := false // the tree must be read again before a change
	var idleSince time.Time
	nextSummary := now.Add(d.Summary)
	changes := 0
	d.log("following %d..%d kbit/s down, %d..%d up from %d/%d, delay from %s", p.Min[Down], p.Max[Down], p.Min[Up], p.Max[Up], p.Base[Down], p.Base[Up], d.Source.Name())
	// One timer for everything: each tick reads the replies that came
	// back and sends the next probe; every Interval it also decides. A
	// wakeup is what costs on a router (see stamped).
	probe := d.Probe
	tick := time.NewTicker(probe)
	defer tick.Stop()
	var raws []Raw
	lastStep := now
	for {
		select {
		case <-ctx.Done():
			d.restoreBase(p)
			return nil
		case err := <-srcDone:
			srcDone <- err // for the deferred wait
			if ctx.Err() != nil {
				d.restoreBase(p) // the source saw the end first
				return nil
			}
			return fmt.Errorf("delay source %s stopped: %w", d.Source.Name(), err)
		case now = <-tick.C:
		}
		quiet := c.State(Down) != Loaded && c.State(Down) != Bloated && c.State(Up) != Loaded && c.State(Up) != Bloated
		raws = d.Source.Probe(now, raws[:0])
		for _, r := range raws {
			b := baselines[r.Path]
			if b == nil {
				b = &Baseline{}
				baselines[r.Path] = b
			}
			added := b.Add(r.At, r.Ms, quiet)
			c.Add(Sample{At: r.At, AddedMs: added, Both: r.Both, Dir: r.Dir})
			d.Metrics.sample(r, added)
		}
		if now.Sub(lastStep)+probe/2 < p.Interval {
			continue
		}
		lastStep = now
		// the shaper's carried load since the last tick
		var load [2]int
		dt := now.Sub(lastRead).Seconds()
		lastRead = now
		for dir, dev := range d.Devices {
			v, idx, err := counters[dir].read()
			if err != nil || idx != ifindex[dir] {
				// gone (PPPoE down) or re-created (a reconnect): its tree is
				// a new one, read it again once it is back
				if !stale {
					d.log("%s %s: %v; waiting for it", Dir(dir), dev, errOr(err, "re-created"))
				}
				// the first sight of a device is not a change of it
				resync = resync || err != nil || ifindex[dir] != 0
				stale = true
				ifindex[dir] = idx
				last[dir] = v
				continue
			}
			if !stale && v >= last[dir] && dt > 0 {
				load[dir] = int(float64(v-last[dir]) * 8 / 1000 / dt)
			}
			last[dir] = v
		}
		if stale {
			stale = ifindex[0] == 0 || ifindex[1] == 0
			continue
		}
		if resync {
			got, err := d.Shaper.Resync()
			if err != nil {
				continue // a start may still be building it
			}
			resync = false
			d.log("shaper found again at %d/%d kbit/s", got.Download, got.Upload)
			if got.Download != c.Rate(Down) || got.Upload != c.Rate(Up) {
				d.set(c, nil, &resync)
			}
		}
		ch := c.Step(now, load)
		if len(ch) > 0 {
			d.set(c, ch, &resync)
			changes += len(ch)
		}
		d.Metrics.update(c, load, changes)
		// sleep while nothing moves: the tick, and with it the probes and
		// the decisions, slows to one per SleepProbe; the first loaded
		// tick wakes it
		want := d.Probe
		if c.State(Down) == Idle && c.State(Up) == Idle {
			if idleSince.IsZero() {
				idleSince = now
			}
			if now.Sub(idleSince) >= d.Sleep {
				want = d.SleepProbe
			}
		} else {
			idleSince = time.Time{}
		}
		if probe != want {
			if want == d.SleepProbe {
				d.log("idle for %v: probing every %v", d.Sleep, d.SleepProbe)
			}
			probe = want
			tick.Reset(probe)
		}
		if !now.Before(nextSummary) {
			nextSummary = now.Add(d.Summary)
			d.log("summary download=%d upload=%d state=%s/%s load=%d/%d changes=%d", c.Rate(Down), c.Rate(Up), c.State(Down), c.State(Up), load[Down], load[Up], changes)
		}
	}
}

// set applies the controller's rates and logs each change with its reason.
func (d *Daemon) set(c *Controller, ch []Change, resync *bool) {
	err := d.Shaper.Set(config.Rates{Download: c.Rate(Down), Upload: c.Rate(Up)})
	if err != nil {
		d.log("rate change failed: %v; reading the tree again", err)
		*resync = true
		d.Metrics.failed.Add(1)
		return
	}
	for _, x := range ch {
		d.log("change dir=%s from=%d to=%d why=%q", x.Dir, x.From, x.To, x.Why)
	}
}

// restoreBase leaves the configured rates behind.
func (d *Daemon) restoreBase(p Params) {
	if err := d.Shaper.Set(config.Rates{Download: p.Base[Down], Upload: p.Base[Up]}); err != nil {
		d.log("stopping: the base rates could not be restored: %v", err)
		return
	}
	d.log("stopped; shaper back at %d/%d kbit/s", p.Base[Down], p.Base[Up])
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
