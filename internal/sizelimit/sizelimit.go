// Package sizelimit reads files with a size limit, so a wrong path (/dev/zero,
// a disk image, a log) is refused with a message instead of exhausting a
// router's memory. The limits of sqmkit's inputs are listed in
// docs/design.md, "Input limits".
package sizelimit

import (
	"fmt"
	"io"
	"os"
)

// The limits, by kind of input.
const (
	UCI      = 4 << 20  // an /etc/config file: LuCI writes a few KB
	Sys      = 64 << 10 // a /sys or /proc file: a few bytes
	TCOutput = 16 << 20 // `tc -s` output, pasted or live: a router prints a few KB
	Result   = 1 << 30  // a `sqmkit test --json` file (a 66-min test at 10 ms probes is ~60 MB)
)

// ReadFile reads path, refusing it when it holds more than limit bytes;
// what names the kind of file in the error ("UCI config").
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path, limit, what)
}

// Read reads r (named name in errors) up to limit bytes.
func Read(r io.Reader, name string, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %s, the limit for a %s; is it the right file?", name, Size(limit), what)
	}
	return b, nil
}

// Size prints a byte count in binary units.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
