package apply

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// What each start left is recorded: the devices, the backend, the section,
// and whether sqmkit created the IFB; a stop without a record deletes no
// device, and one with a record deletes only the IFB it created.
func TestRecordsWhatItApplied(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	tg := target(config.FQCodel)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	rec, ok, err := o.Records.Get("wan")
	if !ok || err != nil || rec.Section != "wan" || rec.Backend != "fq_codel" || rec.IFB != "ifb4wan" || !rec.IFBCreated || !rec.Egress || !rec.Ingress {
		t.Fatalf("record after start: %+v %v %v", rec, ok, err)
	}
	// a second start finds the IFB there, and it is still the one it created
	Start([]Target{tg}, o)
	if rec, _, _ = o.Records.Get("wan"); !rec.IFBCreated {
		t.Errorf("a restart forgot that sqmkit created the IFB: %+v", rec)
	}
	// without its record, a stop removes the trees but no device
	o.Records.Delete("wan")
	if r := Stop([]Target{tg}, o)[0]; r.State != Stopped || !k.Exists("ifb4wan") || state(t, k).Shaped("wan") {
		t.Errorf("stop without a record: %s %v %q, IFB there %v", r.State, r.Err, r.Done, k.Exists("ifb4wan"))
	}
	// an IFB of someone else's, there before the start (no sqmkit mark),
	// is used and kept
	k.Batch("ip", false, [][]string{{"link", "del", "dev", "ifb4wan"}, {"link", "add", "name", "ifb4wan", "type", "ifb"}, {"link", "set", "dev", "ifb4wan", "up"}})
	Start([]Target{tg}, o)
	if rec, _, _ = o.Records.Get("wan"); rec.IFBCreated {
		t.Errorf("an IFB sqmkit found is recorded as created: %+v", rec)
	}
	if r := Stop([]Target{tg}, o)[0]; r.State != Stopped || !k.Exists("ifb4wan") {
		t.Errorf("stop of a found IFB: %s %v, IFB there %v", r.State, r.Err, k.Exists("ifb4wan"))
	}
	if _, ok, _ := o.Records.Get("wan"); ok {
		t.Error("a stop left the record")
	}
	// and one that is down is raised, not marked, and kept too
	if _, err := k.Batch("ip", false, [][]string{{"link", "set", "dev", "ifb4wan", "down"}}); err != nil {
		t.Fatal(err)
	}
	Start([]Target{tg}, o)
	if rec, _, _ = o.Records.Get("wan"); rec.IFBCreated || k.Link("ifb4wan").Alias != "" || !k.Link("ifb4wan").Up {
		t.Errorf("a found IFB that was down: record %+v, link %+v", rec, k.Link("ifb4wan"))
	}
	if r := Stop([]Target{tg}, o)[0]; r.State != Stopped || !k.Exists("ifb4wan") {
		t.Errorf("stop of a found IFB that was down: %s %v, IFB there %v", r.State, r.Err, k.Exists("ifb4wan"))
	}
}

// A queue moved to another device: the start removes what the same
// section left on the old one, from its record (the IFB it created too).
func TestStartRetiresMovedQueue(t *testing.T) {
	k := newFake()
	k.AddDevice("wanp", true)
	o := fakeOptions(t, k)
	Start([]Target{target(config.Cake)}, o)
	moved := target(config.Cake)
	moved.Queue.Interface, moved.Facts.Device = "wanp", "wanp"
	if r := Start([]Target{moved}, o)[0]; r.Failed() {
		t.Fatalf("start on wanp: %s %v", r.State, r.Err)
	}
	s, _ := k.Read("wan", "wanp", "ifb4wanp")
	if s.Shaped("wan") || s.IngressQdisc("wan") != nil || k.Exists("ifb4wan") || !s.Shaped("wanp") || !s.Shaped("ifb4wanp") {
		t.Errorf("after the move: %s, ifb4wan there %v", ids(s), k.Exists("ifb4wan"))
	}
	if _, ok, _ := o.Records.Get("wan"); ok {
		t.Error("the old device's record is still there")
	}
}

// An IFB name that belongs to a device of another kind is refused before
// anything changes.
func TestForeignIFBRefused(t *testing.T) {
	k := newFake()
	k.AddDevice("br-lan", true)
	tg := target(config.Cake)
	tg.Queue.IFB = "br-lan"
	r := Start([]Target{tg}, fakeOptions(t, k))[0]
	var fe *config.FieldError
	if r.State != Failed || r.Err == nil || !errors.As(r.Err, &fe) || fe.Option != "ifb" || !strings.Contains(r.Err.Error(), "not an IFB") {
		t.Fatalf("start with ifb br-lan: %s %v", r.State, r.Err)
	}
	if len(k.Calls) != 0 {
		t.Errorf("%d batches ran", len(k.Calls))
	}
	// the derived name taken by another kind of device: refused too
	k2 := newFake()
	k2.AddDevice("ifb4wan", true)
	if r := Start([]Target{target(config.Cake)}, fakeOptions(t, k2))[0]; r.State != Failed || !strings.Contains(r.Err.Error(), "fix: set option ifb") {
		t.Errorf("start with ifb4wan taken: %s %v", r.State, r.Err)
	}
}

// TestForgedRecord: a record alone never deletes a device: one that names
// a user's IFB, with its very ifindex, as one sqmkit created leaves it,
// since the IFB lacks sqmkit's mark (the alias its starts give theirs);
// an IFB a start made carries the mark and goes with its stop.
func TestForgedRecord(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	if _, err := k.Batch("ip", false, [][]string{{"link", "add", "name", "ifb0", "type", "ifb"}, {"link", "set", "dev", "ifb0", "up"}}); err != nil {
		t.Fatal(err)
	}
	forged := applied.Record{Section: "wan", Device: "wan", Backend: "cake", IFB: "ifb0", IFBCreated: true, IFBIndex: k.Link("ifb0").Index, Ingress: true}
	if err := o.Records.Put(forged); err != nil {
		t.Fatal(err)
	}
	if r := StopRecords([]applied.Record{forged}, o)[0]; r.Failed() || !k.Exists("ifb0") {
		t.Errorf("stop of a forged record: %s %v; ifb0 there: %v", r.State, r.Err, k.Exists("ifb0"))
	}
	tg := target(config.Cake)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	if l := k.Link("ifb4wan"); l.Alias != plan.IFBAlias {
		t.Fatalf("the IFB the start made has alias %q", l.Alias)
	}
	if r := Stop([]Target{tg}, o)[0]; r.Failed() || k.Exists("ifb4wan") {
		t.Errorf("stop: %s %v; its IFB still there: %v", r.State, r.Err, k.Exists("ifb4wan"))
	}
}

// TestStartWriteAhead: the record of what a start may leave is on disk
// before the kernel changes; a start that cannot write it (a full
// /var/run: here a file where the records' directory must be) changes
// nothing and fails, so a later stop never finds a shaper it has no
// record of.
func TestStartWriteAhead(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	os.RemoveAll(o.Records.Dir)
	if err := os.WriteFile(o.Records.Dir, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Start([]Target{target(config.Cake)}, o)[0]
	if !r.Failed() || !strings.Contains(fmt.Sprint(r.Err), "applies nothing") || state(t, k).Shaped("wan") || k.Exists("ifb4wan") {
		t.Errorf("start without room for its record: %s %v; shaped %v", r.State, r.Err, state(t, k).Shaped("wan"))
	}
	// with room: the pending record names the IFB this start makes, so a
	// start that died on the way is stopped whole by its record
	os.Remove(o.Records.Dir)
	tg := target(config.Cake)
	p, _ := plan.Build(tg.Queue, tg.Facts)
	res := Result{Plan: p}
	if err := o.intend(tg.Queue, &res, applied.Record{}, false); err != nil {
		t.Fatal(err)
	}
	rec, ok, _ := o.Records.Get("wan")
	if !ok || !rec.Pending || rec.IFB != "ifb4wan" || !rec.IFBCreated || !rec.Egress || !rec.Ingress {
		t.Fatalf("write-ahead record %+v", rec)
	}
	k.Batch("ip", false, p.Dirs[1].Setup) // the start got as far as its IFB, then died
	if r := StopRecords([]applied.Record{rec}, o)[0]; r.Failed() || k.Exists("ifb4wan") {
		t.Errorf("stop of a dead start's record: %s %v; IFB left %v", r.State, r.Err, k.Exists("ifb4wan"))
	}
}

// TestStopReadsUnderLock: a stop acts on the record as it is once it
// holds the device's lock: a start that ran meanwhile and made an IFB
// (its record newer than the stop's copy) does not leave it orphaned.
func TestStopReadsUnderLock(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	stale := applied.Record{Section: "wan", Device: "wan", Backend: "cake", Egress: true}
	if r := Start([]Target{target(config.Cake)}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	if r := StopRecords([]applied.Record{stale}, o)[0]; r.Failed() || k.Exists("ifb4wan") {
		t.Errorf("stop with a copy read before the start: %s %v; IFB left %v", r.State, r.Err, k.Exists("ifb4wan"))
	}
}

// TestUninstallRemovesNSSIFB: a stop keeps the IFB nss made (re-creating
// one under load crashed NSS routers), uninstall's stop removes it.
func TestUninstallRemovesNSSIFB(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	tg := target(config.NSS)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	rec, _, _ := o.Records.Get("wan")
	ifb := rec.IFB
	if r := Stop([]Target{tg}, o)[0]; r.Failed() || !k.Exists(ifb) {
		t.Fatalf("stop: %s %v, nss IFB kept %v", r.State, r.Err, k.Exists(ifb))
	}
	Start([]Target{tg}, o)
	rec, _, _ = o.Records.Get("wan")
	u := o
	u.Uninstall = true
	if r := StopRecords([]applied.Record{rec}, u)[0]; r.Failed() || k.Exists(ifb) {
		t.Errorf("uninstall's stop: %s %v, IFB left %v", r.State, r.Err, k.Exists(ifb))
	}
}
