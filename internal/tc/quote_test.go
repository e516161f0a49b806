package tc

import (
	"reflect"
	"strings"
	"testing"
)

func TestRenderSplitRoundTrip(t *testing.T) {
	for _, argv := range [][]string{
		{"qdisc", "add", "dev", "wan", "root", "handle", "1:", "htb", "default", "1"},
		{"link", "add", "name", "ifb@wan", "type", "ifb"},
		{"qdisc", "add", "dev", "my wan", "root", "pfifo"},
		{"x", `say "hi"`, "it's", ""},
		{"trailing\\"},
	} {
		text, err := Render([][]string{argv})
		if err != nil {
			t.Fatalf("Render(%q): %v", argv, err)
		}
		if strings.Count(text, "\n") != 1 {
			t.Errorf("Render(%q) = %q, want one line", argv, text)
		}
		got, err := Split(strings.TrimSuffix(text, "\n"))
		if err != nil || !reflect.DeepEqual(got, argv) {
			t.Errorf("Split(Render(%q)) = %q, %v", argv, got, err)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	for _, w := range []string{"a#b", "a\nb", `both"'`} {
		if _, err := Render([][]string{{"qdisc", w}}); err == nil {
			t.Errorf("Render accepted %q", w)
		}
	}
}

func TestSplitLikeIproute2(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"qdisc show # comment", []string{"qdisc", "show"}},
		{`  a  "b c"d 'e'`, []string{"a", "b c", "d", "e"}},
		{"", nil},
	} {
		got, err := Split(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := Split(`a "b`); err == nil {
		t.Error("Split accepted an unterminated quote")
	}
}
