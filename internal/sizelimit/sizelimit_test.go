package sizelimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 5, "test file"); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q %v", b, err)
	}
	if _, err := ReadFile(p, 4, "test file"); err == nil || !strings.Contains(err.Error(), p+": larger than 4 bytes, the limit for a test file") {
		t.Errorf("over the limit: %v", err)
	}
	// an endless file is refused after max+1 bytes, not read to the end
	if _, err := ReadFile("/dev/zero", UCI, "UCI config"); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("/dev/zero: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none"), 1, "x"); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
