package autorate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
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
	// StatusFile, when set, gets the Status every StatusEvery (0: 5 s).
	StatusFile  string
	StatusEvery time.Duration

	paused bool // a test or a tune held the queue at the last change
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
	d.defaults()
	p := d.Params
	now := time.Now()
	c, err := New(p, now)
	if err != nil {
		return err
	}
	// start at the base rates: the controller's first belief
	if err := d.Shaper.Set(config.Rates{Download: p.Base[config.Download], Upload: p.Base[config.Upload]}); err != nil {
		return fmt.Errorf("setting the base rates: %w", err)
	}
	sctx, stopSource := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- d.Source.Run(sctx) }()
	defer func() {
		stopSource()
		<-srcDone
	}()
	f := &follower{d: d, c: c, baselines: map[string]*Baseline{}, lastRead: now, lastStep: now, stale: true,
		nextSummary: now.Add(d.Summary), probe: d.Probe}
	for dir, dev := range d.Devices {
		f.counters[dir] = &counter{path: filepath.Join(d.Root, "sys/class/net", dev), fd: -1}
		defer f.counters[dir].close()
	}
	d.log("following %d..%d kbit/s down, %d..%d up from %d/%d, delay from %s, largest packet %d bytes", p.Min[config.Download], p.Max[config.Download], p.Min[config.Upload], p.Max[config.Upload], p.Base[config.Download], p.Base[config.Upload], d.Source.Name(), p.PacketBits[config.Upload]/8)
	// One timer for everything: each tick reads the replies that came
	// back and sends the next probe; every Interval it also decides. A
	// wakeup is what costs on a router (see stamped).
	f.tick = time.NewTicker(f.probe)
	defer f.tick.Stop()
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
		case now = <-f.tick.C:
		}
		f.sample(now)
		if now.Sub(f.lastStep)+f.probe/2 < p.Interval {
			continue
		}
		f.lastStep = now
		f.step(now)
	}
}

// defaults fills what the caller left zero.
func (d *Daemon) defaults() {
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
	if d.StatusEvery == 0 {
		d.StatusEvery = statusEvery
	}
}

// follower is one Run's state between ticks.
type follower struct {
	d         *Daemon
	c         *Controller
	counters  [2]*counter
	baselines map[string]*Baseline
	last      [2]uint64
	ifindex   [2]int
	lastRead  time.Time
	stale     bool // the counters' previous values are not usable
	resync    bool // the tree must be read again before a change
	idleSince time.Time
	// nextSummary is when the next summary line is due.
	nextSummary time.Time
	changes     int
	probe       time.Duration
	tick        *time.Ticker
	raws        []Raw
	lastStep    time.Time
	status      Status
	nextStatus  time.Time
}

// sample reads the delay source's replies into the controller.
func (f *follower) sample(now time.Time) {
	c := f.c
	quiet := c.State(config.Download) != Loaded && c.State(config.Download) != Bloated && c.State(config.Upload) != Loaded && c.State(config.Upload) != Bloated
	f.raws = f.d.Source.Probe(now, f.raws[:0])
	for _, r := range f.raws {
		b := f.baselines[r.Path]
		if b == nil {
			b = &Baseline{}
			f.baselines[r.Path] = b
		}
		added := b.Add(r.At, r.Ms, quiet)
		c.Add(Sample{At: r.At, AddedMs: added, Both: r.Both, Dir: r.Dir})
		f.d.Metrics.sample(r, added)
	}
}

// step decides once: reads the load, finds the shaper again after its
// device came back, changes the rates, and paces the ticks.
func (f *follower) step(now time.Time) {
	d, c := f.d, f.c
	load, ok := f.load(now)
	if !ok {
		return
	}
	if f.resync {
		got, err := d.Shaper.Resync()
		if err != nil {
			return // a start may still be building it
		}
		f.resync = false
		d.log("shaper found again at %d/%d kbit/s", got.Download, got.Upload)
		if got.Download != c.Rate(config.Download) || got.Upload != c.Rate(config.Upload) {
			d.set(c, nil, &f.resync)
		}
	}
	if ch := c.Step(now, load); len(ch) > 0 {
		d.set(c, ch, &f.resync)
		f.changes += len(ch)
	}
	d.Metrics.update(c, load, f.changes)
	if d.StatusFile != "" && !now.Before(f.nextStatus) {
		f.nextStatus = now.Add(d.StatusEvery)
		if err := d.record(&f.status, c, load, now); err != nil {
			d.log("status file: %v", err)
		}
	}
	f.pace(now)
	if !now.Before(f.nextSummary) {
		f.nextSummary = now.Add(d.Summary)
		d.log("summary download=%d upload=%d state=%s/%s load=%d/%d changes=%d", c.Rate(config.Download), c.Rate(config.Upload), c.State(config.Download), c.State(config.Upload), load[config.Download], load[config.Upload], f.changes)
	}
}

// load is the shaper's carried load since the last step; not ok while a
// device is gone or its counters were just (re)opened.
func (f *follower) load(now time.Time) (load [2]int, ok bool) {
	dt := now.Sub(f.lastRead).Seconds()
	f.lastRead = now
	for dir, dev := range f.d.Devices {
		v, idx, err := f.counters[dir].read()
		if err != nil || idx != f.ifindex[dir] {
			// gone (PPPoE down) or re-created (a reconnect): its tree is
			// a new one, read it again once it is back
			if !f.stale {
				f.d.log("%s %s: %v; waiting for it", config.Direction(dir), dev, errOr(err, "re-created"))
			}
			// the first sight of a device is not a change of it
			f.resync = f.resync || err != nil || f.ifindex[dir] != 0
			f.stale = true
			f.ifindex[dir] = idx
			f.last[dir] = v
			continue
		}
		if !f.stale && v >= f.last[dir] && dt > 0 {
			load[dir] = int(float64(v-f.last[dir]) * 8 / 1000 / dt)
		}
		f.last[dir] = v
	}
	if f.stale {
		f.stale = f.ifindex[0] == 0 || f.ifindex[1] == 0
		return load, false
	}
	return load, true
}

// pace sleeps while nothing moves: the tick, and with it the probes and
// the decisions, slows to one per SleepProbe; the first loaded tick wakes
// it.
func (f *follower) pace(now time.Time) {
	d := f.d
	want := d.Probe
	if f.c.State(config.Download) == Idle && f.c.State(config.Upload) == Idle {
		if f.idleSince.IsZero() {
			f.idleSince = now
		}
		if now.Sub(f.idleSince) >= d.Sleep {
			want = d.SleepProbe
		}
	} else {
		f.idleSince = time.Time{}
	}
	if f.probe != want {
		if want == d.SleepProbe {
			d.log("idle for %v: probing every %v", d.Sleep, d.SleepProbe)
		}
		f.probe = want
		f.tick.Reset(f.probe)
	}
}

// set applies the controller's rates and logs each change with its reason.
func (d *Daemon) set(c *Controller, ch []Change, resync *bool) {
	err := d.Shaper.Set(config.Rates{Download: c.Rate(config.Download), Upload: c.Rate(config.Upload)})
	var paused *apply.Paused
	if errors.As(err, &paused) {
		// a test or a tune holds the queue: no change until it ends, said
		// once; the rates it leaves are read again then
		if !d.paused {
			d.log("paused: %v", err)
			d.paused = true
		}
		*resync = true
		return
	}
	if d.paused {
		d.log("resumed: the queue is free again")
		d.paused = false
	}
	if err != nil {
		d.log("rate change failed: %v; reading the tree again", err)
		*resync = true
		d.Metrics.failed.Add(1)
		return
	}
	for _, x := range ch {
		d.log("change dir=%s from=%d to=%d reason=%s why=%q", x.Dir, x.From, x.To, x.Reason, x.Why)
	}
}

// restoreBase leaves the configured rates behind.
func (d *Daemon) restoreBase(p Params) {
	if err := d.Shaper.Set(config.Rates{Download: p.Base[config.Download], Upload: p.Base[config.Upload]}); err != nil {
		d.log("stopping: the base rates could not be restored: %v", err)
		return
	}
	d.log("stopped; shaper back at %d/%d kbit/s", p.Base[config.Download], p.Base[config.Upload])
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
