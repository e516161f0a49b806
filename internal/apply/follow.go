package apply

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/statefile"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// Sender runs tc lines on a long-lived process (tc.Stream).
type Sender interface {
	Send(lines [][]string) error
	Close() error
}

// Streamer is a Kernel that keeps one tc process for many changes; a
// Kernel without it (the fakes) gets one Batch per change.
type Streamer interface {
	Stream(prog string) (Sender, error)
}

// Stream starts one long-lived `tc -force -batch -`.
func (s System) Stream(prog string) (Sender, error) { return s.Runner.Stream(prog) }

var _ Streamer = System{&tc.Runner{}}

// Follower changes one running queue's rates again and again (autorate):
// the live tree is read and checked once, against the plan at its own
// rates, and kept in memory; each change is the same `tc change` lines as
// Rate's (plan.Change), sent to one long-lived tc, so a change costs no
// process and no read. Resync reads the tree again: after a refused
// change, or when the caller has reason to doubt it (a hotplug restart).
type Follower struct {
	t   Target
	o   Options
	by  string
	cur *plan.Plan
	s   Sender
	// the queue's two locks, their files kept open between changes: a
	// change is then a few system calls besides tc's (TestFollowKeepsLocks)
	lock *statefile.Kept
	job  *joblock.Handle
}

// Follow starts following t's running queue; by names the caller in the
// kept rates (status shows it).
func Follow(t Target, by string, o Options) (*Follower, error) {
	f := &Follower{t: t, o: o, by: by, lock: o.Locks.keep(t.Queue.Interface)}
	if o.Jobs != "" {
		f.job = joblock.NewHandle(o.Jobs, joblock.QueueName(t.Queue.Interface))
	}
	if _, err := f.Resync(); err != nil {
		return nil, err
	}
	return f, nil
}

// Rates are the rates the follower believes the kernel holds.
func (f *Follower) Rates() config.Rates {
	return f.cur.Rates()
}

// Devices are the devices whose roots hold each direction's shaper, by
// config.Direction: the IFB for the download, the WAN device for the
// upload ("" unshaped).
func (f *Follower) Devices() (devs [2]string) {
	for _, d := range f.cur.Dirs {
		devs[d.Direction] = d.Device
	}
	return devs
}

// Resync reads the live tree and takes the rates it runs at; the tree must
// be the plan at those rates (a start's job otherwise).
func (f *Follower) Resync() (config.Rates, error) {
	release, err := f.o.Locks.acquireKept(f.lock, f.t.Queue.Interface)
	if err != nil {
		return config.Rates{}, err
	}
	defer release()
	from, _, err := f.o.ratePlans(f.t, config.Rates{})
	if err != nil {
		return config.Rates{}, err
	}
	f.cur = from
	return f.Rates(), nil
}

// Paused is a follower's change not made because another job (a test, a
// tune) holds the queue: the caller waits for it to end.
type Paused struct {
	Device string
	Holder joblock.Holder
}

func (p *Paused) Error() string {
	h := p.Holder
	what := cmp.Or(h.Kind, "another job")
	return fmt.Sprintf("%s on %s (pid %d, since %s) moves its rates meanwhile", what, p.Device, h.PID, h.Started.Local().Format("15:04:05"))
}

// Set moves the queue to new rates (0 keeps a direction's). An error
// leaves the queue at its previous rates (Rate's rollback) or says that
// it is not: then Resync, or a start, is needed.
func (f *Follower) Set(to config.Rates) error {
	if f.job != nil {
		dev := f.t.Queue.Interface
		release, err := f.job.Take(joblock.Holder{Kind: joblock.AutorateChange, PID: os.Getpid(), Started: time.Now()})
		var busy *joblock.Busy
		if errors.As(err, &busy) {
			return &Paused{Device: dev, Holder: busy.Holder}
		}
		if err != nil {
			return err
		}
		defer release()
	}
	release, err := f.o.Locks.acquireKept(f.lock, f.t.Queue.Interface)
	if err != nil {
		return err
	}
	defer release()
	want := f.t.Queue
	for _, d := range f.cur.Dirs {
		want.SetRate(d.Direction, d.RateKbit)
	}
	for _, dir := range config.Directions {
		if to.Of(dir) > 0 {
			want.SetRate(dir, to.Of(dir))
		}
	}
	next, err := f.o.build(want, f.t.Facts)
	if err != nil {
		return err
	}
	n, err := f.o.recorded(f.cur, next, f.by, f.send)
	if err != nil {
		return err
	}
	if n > 0 {
		f.cur = next
	}
	return nil
}

// send feeds the stream, starting it on first use and once more after it
// died; a Kernel without streams gets a batch.
func (f *Follower) send(lines [][]string) error {
	st, ok := f.o.Kernel.(Streamer)
	if !ok {
		_, err := f.o.Kernel.Batch("tc", false, lines)
		return err
	}
	if f.s == nil {
		s, err := st.Stream("tc")
		if err != nil {
			return err
		}
		f.s = s
	}
	err := f.s.Send(lines)
	if _, refused := err.(*tc.BatchError); err != nil && !refused {
		f.s = nil // dead or stuck: closed by Send; the next change starts another
	}
	return err
}

// Close ends the long-lived tc and closes the lock files.
func (f *Follower) Close() error {
	if f.lock != nil {
		f.lock.Close()
	}
	if f.job != nil {
		f.job.Close()
	}
	if f.s == nil {
		return nil
	}
	err := f.s.Close()
	f.s = nil
	return err
}

// String names the queue for logs.
func (f *Follower) String() string {
	return fmt.Sprintf("%s (%s)", f.t.Queue.Section, f.t.Queue.Interface)
}
