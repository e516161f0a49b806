// Package statefile writes and reads sqmkit's files (its state under
// /var/run/sqmkit, records, the config it edits, what install places) so
// that nothing planted at a path takes them elsewhere: a file is replaced
// whole through a temporary file created new (O_EXCL|O_NOFOLLOW) in the
// target's own directory and renamed over it, so a symlink or a FIFO
// planted at the temporary name makes the write fail instead of writing
// through it or hanging; state files are read only when they are regular
// files, opened without blocking. TestPlanted replays both.
package statefile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
)

// Write replaces path with b whole, with mode. A failed write (a full
// filesystem) leaves the old file and no temporary one.
func Write(path string, b []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+filepath.Base(path)+"."+hex.EncodeToString(suffix[:])+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode) // the umask does not decide a binary's or a script's mode
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// WriteThrough is Write on the file path names when path is a symlink
// (a user's /etc/config/sqm linked elsewhere stays linked), keeping the
// target's mode.
func WriteThrough(path string, b []byte) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return err
	}
	return Write(target, b, fi.Mode().Perm())
}

// Open opens a state file for reading: a regular file only, never a FIFO
// (which would block) or a device; a symlink is not followed.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

// Read reads a state file of at most limit bytes (what names its kind in
// the error).
func Read(path string, limit int64, what string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sizelimit.Read(f, path, limit, what)
}

// Create opens a state file for writing from its start (a job's log): made
// if missing, never through a symlink, never a FIFO or a device.
func Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	// blocking writes from here (a regular file never blocks)
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenLock opens a lock file for reading and writing, made if missing: a
// regular file only, never through a symlink, never blocking on a FIFO
// planted there.
func OpenLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("lock %s: not a regular file", path)
	}
	return f, nil
}

// Kept is a lock file that a long-lived process takes again and again
// (autorate, at each rate change): it stays open between uses, so a use
// costs an fstat besides the lock's own calls, not a walk of its path, an
// open and a close. A file no longer linked (removed, or replaced by a
// rename over it) is opened again from its path, so the lock is always
// the one other processes take (TestKept).
type Kept struct {
	Path string
	f    *os.File
}

// File is the open lock file, opened (with its directory made) on first
// use and again once Path no longer names it.
func (k *Kept) File() (*os.File, error) {
	if k.f != nil {
		var st syscall.Stat_t
		if syscall.Fstat(int(k.f.Fd()), &st) == nil && st.Nlink > 0 {
			return k.f, nil
		}
		k.Close()
	}
	if err := os.MkdirAll(filepath.Dir(k.Path), 0o755); err != nil {
		return nil, err
	}
	f, err := OpenLock(k.Path)
	if err != nil {
		return nil, err
	}
	k.f = f
	return f, nil
}

// Close closes the file (and with it any lock this process held on it).
func (k *Kept) Close() {
	if k.f != nil {
		k.f.Close()
		k.f = nil
	}
}
