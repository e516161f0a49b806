package apply

import (
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
)

// mqTarget is target(cake) with use_mq on a device of n TX and RX queues.
func mqTarget(k fake, n int) Target {
	tg := target(config.Cake)
	tg.Queue.UseMQ = true
	tg.Facts.TXQueues, tg.Facts.RXQueues = n, n
	k.Kernel.SetTXQueues("wan", n)
	return tg
}

// roots are the root qdisc kinds of wan and its IFB.
func roots(t *testing.T, k fake) (wan, ifb string) {
	t.Helper()
	s := state(t, k)
	if r := s.Root("wan"); r != nil {
		wan = r.Kind
	}
	if r := s.Root("ifb4wan"); r != nil {
		ifb = r.Kind
	}
	return wan, ifb
}

// TestStartCakeMQFallsBack: a kernel or tc without cake_mq gets plain cake
// with a warning that says why; status, a hotplug event and a rate change
// then plan what was applied, and a later start, on a kernel that has
// cake_mq, tries it again.
func TestStartCakeMQFallsBack(t *testing.T) {
	k := newFake()
	k.Kernel.NoCakeMQ = true
	o := fakeOptions(t, k)
	tg := mqTarget(k, 2)
	r := Start([]Target{tg}, o)[0]
	if r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	if w, i := roots(t, k); w != "cake" || i != "cake" {
		t.Fatalf("roots %q %q, want plain cake", w, i)
	}
	for _, d := range r.Dirs {
		if d.PlainCake == "" || len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "plain cake") {
			t.Errorf("%s: warnings %q, plain cake %q", d.Direction.Side(), d.Warnings, d.PlainCake)
		}
	}
	if rec, _, _ := o.Records.Get("wan"); rec.PlainCake == "" {
		t.Errorf("the record does not say cake_mq was refused: %+v", rec)
	}
	if s := Inspect([]Target{tg}, o)[0]; !s.Matches() {
		t.Errorf("status after the fallback: %v %v", s.Diffs, s.Err)
	}
	hot := o
	hot.Hotplug = true
	calls := len(k.Calls)
	if r := Start([]Target{tg}, hot)[0]; r.Failed() || len(k.Calls) != calls {
		t.Errorf("a hotplug event changed the fallen-back tree: %s %v, %d batches", r.State, r.Err, len(k.Calls)-calls)
	}
	if rec, _, _ := o.Records.Get("wan"); rec.PlainCake == "" {
		t.Errorf("the hotplug event forgot the fallback: %+v", rec)
	}
	if r := Rate(tg, config.Rates{Download: 15000, Upload: 8000}, "test", o); r.State == Failed {
		t.Errorf("rate change on the fallen-back tree: %v", r.Err)
	}
	k.Kernel.NoCakeMQ = false
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start with cake_mq: %s %v", r.State, r.Err)
	}
	if w, i := roots(t, k); w != "cake_mq" || i != "cake_mq" {
		t.Errorf("roots %q %q after cake_mq came, want cake_mq", w, i)
	}
	if rec, _, _ := o.Records.Get("wan"); rec.PlainCake != "" {
		t.Errorf("the record still says plain cake: %+v", rec)
	}
	if s := Inspect([]Target{tg}, o)[0]; !s.Matches() {
		t.Errorf("status on cake_mq: %v %v", s.Diffs, s.Err)
	}
}

// TestStartRemakesIFBForCakeMQ: the single-queue IFB sqmkit made for plain
// cake is made again with a queue per RX queue for cake_mq; an IFB it did
// not make is left as it is, and its direction falls back to plain cake.
func TestStartRemakesIFBForCakeMQ(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	Start([]Target{target(config.Cake)}, o)
	before := k.Link("ifb4wan")
	tg := mqTarget(k, 4)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start with use_mq: %s %v", r.State, r.Err)
	}
	after := k.Link("ifb4wan")
	if after.TXQueues != 4 || after.Index == before.Index {
		t.Errorf("IFB %+v after %+v: want it made again with 4 queues", after, before)
	}
	if w, i := roots(t, k); w != "cake_mq" || i != "cake_mq" {
		t.Errorf("roots %q %q", w, i)
	}
	if rec, _, _ := o.Records.Get("wan"); !rec.IFBCreated || rec.IFBIndex != after.Index {
		t.Errorf("record %+v: the new IFB is sqmkit's", rec)
	}
	// a stop removes cake_mq roots as it removes cake's, and the IFB it made
	if r := Stop([]Target{tg}, o)[0]; r.State != Stopped || k.Exists("ifb4wan") || state(t, k).Shaped("wan") {
		t.Errorf("stop: %s %v %q; IFB there %v", r.State, r.Err, r.Done, k.Exists("ifb4wan"))
	}

	// an IFB that was there before sqmkit
	k2 := newFake()
	o2 := fakeOptions(t, k2)
	k2.Kernel.Batch("ip", false, [][]string{{"link", "add", "name", "ifb4wan", "type", "ifb"}})
	foreign := k2.Link("ifb4wan")
	r := Start([]Target{mqTarget(k2, 4)}, o2)[0]
	if r.Failed() || k2.Link("ifb4wan").Index != foreign.Index {
		t.Fatalf("start beside a found IFB: %s %v; IFB %+v, was %+v", r.State, r.Err, k2.Link("ifb4wan"), foreign)
	}
	if w, i := roots(t, k2); w != "cake_mq" || i != "cake" {
		t.Errorf("roots %q %q, want cake_mq on wan and plain cake on the found IFB", w, i)
	}
}

// TestCakeMQRunningTree: what changes a running tree works on cake_mq: a
// hotplug event finds it as planned, autorate's follower and `sqmkit rate`
// change the root's bandwidth (the instances take it from there), and
// status reads the result as planned.
func TestCakeMQRunningTree(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	tg := mqTarget(k, 2)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	hot := o
	hot.Hotplug = true
	calls := len(k.Calls)
	if r := Start([]Target{tg}, hot)[0]; r.Failed() || len(k.Calls) != calls {
		t.Errorf("hotplug on a cake_mq tree: %s %v, %d batches", r.State, r.Err, len(k.Calls)-calls)
	}
	f, err := Follow(tg, "autorate", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(config.Rates{Download: 15000, Upload: 6000}); err != nil {
		t.Fatalf("follower: %v", err)
	}
	for _, l := range k.Calls[len(k.Calls)-1].Lines {
		if !strings.Contains(strings.Join(l, " "), "root handle 1: cake_mq bandwidth") {
			t.Errorf("follower changed %q, want the cake_mq root", l)
		}
	}
	if r := Rate(tg, config.Rates{Download: 12000, Upload: 5000}, "sqmkit tune", o); r.State == Failed {
		t.Fatalf("rate: %v", r.Err)
	}
	s := state(t, k)
	for _, rec := range s.Of("ifb4wan") {
		if bps, ok := rec.Rate("bandwidth"); rec.Kind == "cake" && (!ok || bps != 12_000_000) {
			t.Errorf("an instance under the root kept its old rate: %s", rec.ID())
		}
	}
	if st := Inspect([]Target{{Queue: withRates(tg.Queue, 12000, 5000), Facts: tg.Facts}}, o)[0]; !st.Matches() {
		t.Errorf("status: %v %v", st.Diffs, st.Err)
	}
}
