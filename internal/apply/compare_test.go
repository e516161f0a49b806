package apply

import (
	"reflect"
	"testing"

	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

func TestReadbackCompare(t *testing.T) {
	st := &tc.State{
		Qdiscs: []tc.Qdisc{
			{Dev: "wan", Kind: "htb", Handle: "1:", Root: true},
			{Dev: "wan", Kind: "fq_codel", Handle: "10:", Parent: "1:1"},
			{Dev: "wan", Kind: "ingress", Handle: "ffff:", Parent: "ffff:fff1"},
			{Dev: "ifb4wan", Kind: "pfifo_fast", Handle: "0:", Root: true}, // kernel default
		},
		Classes: []tc.Class{{Dev: "wan", Kind: "htb", Handle: "1:1", Parent: "root"}},
		Filters: []tc.Filter{{Dev: "wan", Parent: "ffff:", Kind: "u32", Target: "ifb4wan"}},
	}
	got := Readback(st)
	want := []plan.Node{
		{Dev: "wan", Type: "qdisc", Kind: "htb", Handle: "1:", Parent: "root"},
		{Dev: "wan", Type: "qdisc", Kind: "fq_codel", Handle: "10:", Parent: "1:1"},
		{Dev: "wan", Type: "qdisc", Kind: "ingress", Handle: "ffff:", Parent: "ffff:fff1"},
		{Dev: "wan", Type: "class", Kind: "htb", Handle: "1:1", Parent: "1:"},
		{Dev: "wan", Type: "filter", Kind: "u32", Parent: "ffff:"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Readback:\n got %+v\nwant %+v", got, want)
	}
	ifbTree := plan.Node{Dev: "ifb4wan", Type: "qdisc", Kind: "htb", Handle: "1:", Parent: "root"}
	missing, extra := Compare(append(want[:4:4], ifbTree), got)
	if !reflect.DeepEqual(missing, []plan.Node{ifbTree}) || !reflect.DeepEqual(extra, want[4:]) {
		t.Errorf("Compare: missing %+v extra %+v", missing, extra)
	}
}
