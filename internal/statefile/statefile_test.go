package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWrite: a file replaced whole with its mode, a symlinked target
// written through by WriteThrough, and nothing left beside it.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "two" || st.Mode().Perm() != 0o755 {
		t.Errorf("%q %v", b, st.Mode())
	}
	target := filepath.Join(dir, "real")
	os.WriteFile(target, []byte("old"), 0o640)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := WriteThrough(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	st, _ = os.Stat(target)
	if b, _ := os.ReadFile(target); string(b) != "new" || st.Mode().Perm() != 0o640 {
		t.Errorf("through the link: %q %v", b, st.Mode())
	}
	if l, err := os.Readlink(link); err != nil || l != target {
		t.Errorf("the link was replaced: %q %v", l, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("left beside the files: %v", ents)
	}
}

// TestPlanted: a symlink planted at a state path is replaced, not written
// through; a FIFO or a symlink there is refused by Read and Create at once,
// without blocking.
func TestPlanted(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	p := filepath.Join(dir, "status.json")
	os.Symlink(victim, p)
	if err := Write(p, []byte("state"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through a planted symlink: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, q := range []string{fifo, link} {
			if _, err := Read(q, 100, "state"); err == nil {
				t.Errorf("Read %s: no error", q)
			}
			if f, err := Create(q); err == nil {
				f.Close()
				t.Errorf("Create %s: no error", q)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("blocked on a FIFO")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim changed: %q", b)
	}
	if _, err := Read(p, 2, "state"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("over the limit: %v", err)
	}
}

// TestKept: a kept lock file is opened once while its path names it, and
// again once the path was removed or replaced; a symlink planted there is
// refused.
func TestKept(t *testing.T) {
	dir := t.TempDir()
	k := &Kept{Path: filepath.Join(dir, "locks", "wan.lock")}
	defer k.Close()
	first, err := k.File()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := k.File(); err != nil || again != first {
		t.Fatalf("a second use opened again: %v", err)
	}
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"removed", func() error { return os.Remove(k.Path) }},
		{"replaced", func() error { return os.WriteFile(k.Path+".new", nil, 0o600) }},
	} {
		prev, _ := k.File()
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		if change.name == "replaced" {
			if err := os.Rename(k.Path+".new", k.Path); err != nil {
				t.Fatal(err)
			}
		}
		f, err := k.File()
		if err != nil {
			t.Fatalf("%s: %v", change.name, err)
		}
		var a, b syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &a); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(k.Path, &b); err != nil {
			t.Fatal(err)
		}
		if f == prev || a.Ino != b.Ino {
			t.Errorf("%s: the kept file is not the one the path names", change.name)
		}
	}
	k.Close()
	os.Remove(k.Path)
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), k.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := k.File(); err == nil {
		t.Error("a symlink at the lock's path was followed")
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Error("the symlink's target was created")
	}
}
