package tc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeShow is a tc that answers show commands from files in $SHOW named
// after their arguments (qdisc, class-DEV, filter-DEV, filter-DEV-ingress)
// and logs every call to $SHOW/calls.
const fakeShow = `#!/bin/sh
echo "$*" >> "$SHOW/calls"
case "$*" in
"-s -d qdisc show") f=qdisc;;
"-s -d class show dev "*) f=class-$6;;
"-s filter show dev "*" parent ffff:") f=filter-$5-ingress;;
"-s filter show dev "*) f=filter-$5;;
*) echo "unexpected: $*" >&2; exit 1;;
esac
[ -f "$SHOW/$f" ] && cat "$SHOW/$f"
exit 0
`

func TestRead(t *testing.T) {
	dir := t.TempDir()
	show := filepath.Join(dir, "show")
	if err := os.CopyFS(show, os.DirFS("testdata/read")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tc"), []byte(fakeShow), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("SHOW", show)
	for _, c := range []struct {
		name  string
		devs  []string
		calls []string
	}{
		// no device named: the configured ones, and the IFB found through
		// the redirect; tbf on the IFB is not classful, so one call for it
		{"all configured", nil, []string{"-s -d qdisc show", "-s -d class show dev wan", "-s filter show dev wan", "-s filter show dev wan parent ffff:"}},
		{"the IFB alone", []string{"ifb4wan"}, []string{"-s -d qdisc show"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(filepath.Join(show, "calls"))
			r := &Runner{}
			s, err := r.Read(c.devs...)
			if err != nil {
				t.Fatal(err)
			}
			calls, _ := os.ReadFile(filepath.Join(show, "calls"))
			if got := strings.Split(strings.TrimSpace(string(calls)), "\n"); !slices.Equal(got, c.calls) || r.Procs() != int64(len(c.calls)) {
				t.Errorf("calls %q (%d processes), want %q", got, r.Procs(), c.calls)
			}
			if !s.Shaped("wan") || !s.Shaped("ifb4wan") || s.Shaped("p") {
				t.Errorf("roots: wan %v ifb4wan %v p %v", s.Shaped("wan"), s.Shaped("ifb4wan"), s.Shaped("p"))
			}
			if c.devs != nil {
				return
			}
			if cl := s.Find("wan", "class", "1:1"); cl == nil || cl.Parent != "root" || cl.Kind != "htb" {
				t.Errorf("class 1:1 on wan: %+v", cl)
			}
			if got := s.Redirects("wan"); !slices.Equal(got, []string{"ifb4wan"}) {
				t.Errorf("redirects of wan = %q", got)
			}
			if q := s.IngressQdisc("wan"); q == nil || q.Parent != "ingress" {
				t.Errorf("ingress qdisc of wan: %+v", q)
			}
		})
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := (&Runner{}).Read(); err == nil || !strings.Contains(err.Error(), "qdisc show") {
		t.Errorf("without tc: %v, want an error naming the command", err)
	}
}
