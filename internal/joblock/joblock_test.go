package joblock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestOneAtATime: of many takers at once exactly one gets the lock, the
// others are refused naming it; Held sees it, and after Release anyone may
// take it.
func TestOneAtATime(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []*Lock
	var busy int
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Take(dir, "job", Holder{Kind: "test", PID: i, Started: time.Now()})
			mu.Lock()
			defer mu.Unlock()
			var b *Busy
			switch {
			case err == nil:
				got = append(got, l)
			case errors.As(err, &b):
				busy++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || busy != 19 {
		t.Fatalf("%d takers got the lock, %d were refused; want 1 and 19", len(got), busy)
	}
	if h, ok := Held(dir, "job"); !ok || h.Kind != "test" {
		t.Errorf("Held: %+v %v", h, ok)
	}
	_, err := Take(dir, "job", Holder{Kind: "tune"})
	if err == nil || !strings.Contains(err.Error(), "a test is running") {
		t.Errorf("a taker while held: %v", err)
	}
	got[0].Release()
	if _, ok := Held(dir, "job"); ok {
		t.Error("held after release")
	}
	l, err := Take(dir, "job", Holder{Kind: "tune"})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestDeadOwner: a child given the lock holds it while it lives, after its
// parent let go; killed (as kill -9 or the OOM killer would), its lock is
// free at once, for anyone.
func TestDeadOwner(t *testing.T) {
	dir := t.TempDir()
	l, err := Take(dir, "job", Holder{Kind: "tune"})
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sleep", "60")
	c.ExtraFiles = []*os.File{l.File()}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, ok := Held(dir, "job"); !ok {
		t.Fatal("the child does not hold the lock")
	}
	if _, err := Take(dir, "job", Holder{Kind: "test"}); err == nil {
		t.Fatal("taken while the child holds it")
	}
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	if _, ok := Held(dir, "job"); ok {
		t.Error("held after its owner died")
	}
	l, err = Take(dir, "job", Holder{Kind: "test"})
	if err != nil {
		t.Fatalf("after the owner died: %v", err)
	}
	l.Release()
}

// TestPlanted: a FIFO or a symlink planted at the lock's path is refused,
// at once, without writing through it.
func TestPlanted(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.lock"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	os.Symlink(target, filepath.Join(dir, "link.lock"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range []string{"fifo", "link"} {
			if _, err := Take(dir, name, Holder{Kind: "test"}); err == nil {
				t.Errorf("%s: taken", name)
			}
			Held(dir, name)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("blocked on a planted file")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("written through the symlink: %q", b)
	}
}

// TestHandle: a handle's take names it the owner while held, writes
// itself again after another holder wrote itself, and not otherwise.
func TestHandle(t *testing.T) {
	dir := t.TempDir()
	hd := NewHandle(dir, "queue-wan")
	defer hd.Close()
	me := Holder{Kind: AutorateChange, PID: 41}
	heldBy := func() Holder {
		t.Helper()
		_, err := Take(dir, "queue-wan", Holder{Kind: "tune"})
		var busy *Busy
		if !errors.As(err, &busy) {
			t.Fatalf("a tune took the handle's lock: %v", err)
		}
		return busy.Holder
	}
	mtime := func() time.Time {
		st, err := os.Stat(path(dir, "queue-wan"))
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	release, err := hd.Take(me)
	if err != nil {
		t.Fatal(err)
	}
	if h := heldBy(); h.Kind != AutorateChange || h.PID != 41 {
		t.Errorf("held by %+v", h)
	}
	release()
	written := mtime()
	time.Sleep(20 * time.Millisecond) // past the filesystem clock's granularity
	release, err = hd.Take(me)
	if err != nil {
		t.Fatal(err)
	}
	if !mtime().Equal(written) {
		t.Error("the owner was written again though nobody else wrote it")
	}
	release()
	tune, err := Take(dir, "queue-wan", Holder{Kind: "tune", PID: 7})
	if err != nil {
		t.Fatalf("the handle still holds the lock after release: %v", err)
	}
	if _, err := hd.Take(me); err == nil || !strings.Contains(err.Error(), "a tune is running") {
		t.Errorf("a take while a tune holds it: %v", err)
	}
	tune.Release()
	release, err = hd.Take(me)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	h := heldBy()
	if h.Kind != AutorateChange || h.PID != 41 {
		t.Errorf("after a tune wrote itself, held by %+v", h)
	}
	if msg := (&Busy{Name: "queue-wan", Holder: h}).Error(); !strings.Contains(msg, "autorate (pid 41) is changing its rates") {
		t.Errorf("message %q", msg)
	}
}
