package openwrt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// router is a scratch OpenWrt root and a small stand-in for the binary.
func router(t *testing.T) (root, self string) {
	t.Helper()
	root = t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/openwrt_release"), []byte("DISTRIB_ARCH='x86_64'\n"), 0o644)
	self = filepath.Join(t.TempDir(), "sqmkit")
	os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755)
	return root, self
}

// files lists the files under root, relative.
func files(t *testing.T, root string) []string {
	var out []string
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestInstallFullFlash: an install that cannot write one of its files (a
// full flash, a read-only directory: here a file where its directory
// must go) takes back what it wrote, the first-boot defaults included, and
// leaves no manifest; uninstall then has nothing to remove and exits 0, as
// a second uninstall does.
func TestInstallFullFlash(t *testing.T) {
	root, self := router(t)
	os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/lib/sqm"), []byte("in the way"), 0o644)
	before := files(t, root)
	var out bytes.Buffer
	err := Install(root, Options{Self: self, Out: &out})
	if err == nil || !strings.Contains(err.Error(), "taken back") {
		t.Fatalf("install: %v", err)
	}
	if after := files(t, root); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("a failed install left %q (had %q)", after, before)
	}
	for range 2 {
		out.Reset()
		if err := Uninstall(root, Options{Out: &out}); err != nil || !strings.Contains(out.String(), "nothing to remove") {
			t.Errorf("uninstall after the failed install: %v %q", err, out.String())
		}
	}
}

// TestManifestFirst: the manifest names every file before any is written,
// so an install killed halfway is one uninstall removes whole.
func TestManifestFirst(t *testing.T) {
	root, self := router(t)
	var out bytes.Buffer
	if err := Install(root, Options{Self: self, Out: &out}); err != nil {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(filepath.Join(root, Manifest))
	// an install that stopped after its manifest: the files half there
	os.Remove(filepath.Join(root, Binary))
	os.Remove(filepath.Join(root, "etc/init.d/sqmkit"))
	if err := Uninstall(root, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(m)) {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if len(strings.Fields(string(m))) != len(Files)+1 {
		t.Errorf("the manifest names %d paths, want the binary and %d files", len(strings.Fields(string(m))), len(Files))
	}
}
