package tc

import (
	"os"
	"reflect"
	"testing"
)

func TestDecodeShow(t *testing.T) {
	out, err := os.ReadFile("testdata/show-htb.json")
	if err != nil {
		t.Fatal(err)
	}
	st := &State{}
	if err := decodeShow(out, []string{"wan", "ifb4wan"}, st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range st.Qdiscs {
		got = append(got, q.Dev+" "+q.Kind+" "+q.Handle+" "+q.Parent)
	}
	want := []string{"wan htb 1: ", "wan pfifo 10: 1:1", "wan ingress ffff: ffff:fff1", "ifb4wan tbf 1: "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("qdiscs %q, want %q", got, want)
	}
	if len(st.Filters) != 1 || st.Filters[0].Dev != "wan" || st.Filters[0].Target != "ifb4wan" {
		t.Errorf("filters %+v, want one redirect on wan to ifb4wan", st.Filters)
	}
	if err := decodeShow(out, []string{"wan"}, &State{}); err == nil {
		t.Error("more qdisc lists than devices must be an error")
	}
}

func TestParseClasses(t *testing.T) {
	out, err := os.ReadFile("testdata/class-htb.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := parseClasses(string(out)+"class htb 1:10 parent 1:1 prio 0 rate 1Mbit\n", "wan")
	want := []Class{{"wan", "htb", "1:1", "root"}, {"wan", "htb", "1:10", "1:1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
