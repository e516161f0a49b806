package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
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
	// an IFB that was there before the start is used and kept
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
