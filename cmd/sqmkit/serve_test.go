package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
)

func TestByteFlag(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "500M": 500e6, "25G": 25e9, "1.5t": 1.5e12, "2k": 2000, "1e9": 1e9} {
		var b byteFlag
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5G", "G", "5X", "5GB", "1e30"} {
		var b byteFlag
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted as %d", in, b)
		}
	}
}

func TestServeFlagErrors(t *testing.T) {
	ok := bbserver.Config{MaxTests: 1, MaxDuration: time.Second, MaxBytes: 1, PerIP: 1, MaxStreams: 1}
	for _, c := range []struct {
		mod  func(*bbserver.Config)
		want string
	}{
		{func(c *bbserver.Config) { c.MaxTests = 0 }, "--max-tests"},
		{func(c *bbserver.Config) { c.MaxDuration = 0 }, "--max-duration"},
		{func(c *bbserver.Config) { c.PerIP = 0 }, "--per-ip"},
		{func(c *bbserver.Config) { c.MaxStreams = 65 }, "--max-streams"},
	} {
		cfg := ok
		c.mod(&cfg)
		if err := checkServe(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one naming %s", err, c.want)
		}
	}
	if err := checkServe(ok); err != nil {
		t.Error(err)
	}
	for _, args := range [][]string{{"stray"}, {"--rpm-cert", "c.pem"}, {"--max-bytes", "lots"}} {
		var stderr strings.Builder
		if code := runServe(args, io.Discard, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("serve %q: exit %d, want 2 and a message; stderr %q", args, code, stderr.String())
		}
	}
}
