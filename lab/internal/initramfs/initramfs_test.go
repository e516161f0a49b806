package initramfs

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readCPIO parses a newc archive back into files; it is the test's
// independent check of the writer.
func readCPIO(t *testing.T, b []byte) []File {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var out []File
	for off := 0; ; {
		if len(raw)-off < 110 || string(raw[off:off+6]) != "070701" {
			t.Fatalf("bad header at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(raw[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		mode, size, maj, minor, nsize := field(1), field(6), field(9), field(10), field(11)
		name := string(raw[off+110 : off+110+nsize-1])
		off += 110 + nsize
		off += (4 - off%4) % 4
		data := raw[off : off+size]
		off += size
		off += (4 - off%4) % 4
		if name == "TRAILER!!!" {
			if off != len(raw) {
				t.Errorf("%d bytes after the trailer", len(raw)-off)
			}
			return out
		}
		out = append(out, File{Name: name, Mode: uint32(mode), Data: data, Major: uint32(maj), Minor: uint32(minor)})
	}
}

func TestWriteCPIORoundTrip(t *testing.T) {
	tests := [][]File{
		nil,
		{{Name: "a", Mode: 0o100644, Data: []byte("x")}},
		{{Name: "dir", Mode: 0o40755}, {Name: "dir/file12", Mode: 0o100755, Data: []byte("hello, world")},
			{Name: "dev/console", Mode: 0o20600, Major: 5, Minor: 1}},
	}
	for i, files := range tests {
		var buf bytes.Buffer
		if err := WriteCPIO(&buf, files); err != nil {
			t.Fatal(err)
		}
		got := readCPIO(t, buf.Bytes())
		if len(got) != len(files) {
			t.Fatalf("case %d: %d files back, want %d", i, len(got), len(files))
		}
		for j := range files {
			w, g := files[j], got[j]
			if g.Name != w.Name || g.Mode != w.Mode || !bytes.Equal(g.Data, w.Data) || g.Major != w.Major || g.Minor != w.Minor {
				t.Errorf("case %d file %d: got %+v, want %+v", i, j, g, w)
			}
		}
	}
}

// modules61 is the 9p stack of Debian 12's 6.1 as its modules.dep has it.
const modules61 = `kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/netfs/netfs.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/9p/9p.ko: kernel/fs/fscache/fscache.ko kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko
kernel/net/sched/sch_cake.ko:
`

// modules72 is Debian's 7.2: virtio built in, xz-compressed modules.
const (
	modules72 = `kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz
kernel/net/9p/9pnet.ko.xz: kernel/fs/netfs/netfs.ko.xz
kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz
kernel/fs/netfs/netfs.ko.xz:
`
	builtin72 = "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_pci.ko\n"
)

// modDir writes a modules directory with modules.dep dep and
// modules.builtin builtin, every listed module a file of its own name.
func modDir(t *testing.T, dep, builtin string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644)
	if builtin != "" {
		os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(builtin), 0o644)
	}
	for _, l := range strings.Split(dep, "\n") {
		if m, _, ok := strings.Cut(l, ":"); ok {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(m)), 0o755)
			os.WriteFile(filepath.Join(dir, m), []byte(m), 0o644)
		}
	}
	return dir
}

// TestLoadOrder: /init loads what modules.dep says the 9p stack needs, each
// module after its dependencies, and skips what the kernel builds in.
func TestLoadOrder(t *testing.T) {
	for _, c := range []struct {
		name, dep, builtin string
		want               []string // every module, in an order deps-first
	}{
		{"6.1", modules61, "", []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
			"9pnet", "9pnet_virtio", "netfs", "fscache", "9p"}},
		{"7.2", modules72, builtin72, []string{"netfs", "9pnet", "9pnet_virtio", "9p"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Load(modDir(t, c.dep, c.builtin))
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]int{}
			for i, p := range got {
				names[modName(p)] = i
			}
			if len(got) != len(c.want) {
				t.Fatalf("loads %q, want the modules %q", got, c.want)
			}
			for _, w := range c.want {
				if _, ok := names[w]; !ok {
					t.Errorf("%s not loaded: %q", w, got)
				}
			}
			deps := map[string][]string{}
			for _, l := range strings.Split(c.dep, "\n") {
				if m, rest, ok := strings.Cut(l, ":"); ok {
					deps[modName(m)] = strings.Fields(rest)
				}
			}
			for m, i := range names {
				for _, d := range deps[m] {
					if j, ok := names[modName(d)]; ok && j > i {
						t.Errorf("%s loads before its dependency %s: %q", m, modName(d), got)
					}
				}
			}
		})
	}
	if _, err := Load(modDir(t, "kernel/net/9p/9pnet.ko:\n", "")); err == nil || !strings.Contains(err.Error(), "virtio_pci") {
		t.Errorf("a kernel without virtio_pci: %v", err)
	}
}

func TestBuildCachesAndOrders(t *testing.T) {
	dir := t.TempDir()
	bb := filepath.Join(dir, "busybox")
	os.WriteFile(bb, []byte("#!bb"), 0o755)
	mods := modDir(t, modules61, "")
	cache := filepath.Join(dir, "cache")
	p1, err := Build(cache, bb, mods)
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(p1)
	p2, _ := Build(cache, bb, mods)
	if st2, _ := os.Stat(p2); p1 != p2 || !st1.ModTime().Equal(st2.ModTime()) {
		t.Errorf("unchanged inputs rebuilt: %s then %s", p1, p2)
	}
	os.WriteFile(bb, []byte("#!bb v2"), 0o755)
	if p3, _ := Build(cache, bb, mods); p3 == p1 {
		t.Errorf("changed busybox kept the old archive %s", p3)
	}

	b, _ := os.ReadFile(p1)
	files := readCPIO(t, b)
	seen := map[string]bool{}
	var init string
	for _, f := range files {
		if d := filepath.Dir(f.Name); d != "." && !seen[d] {
			t.Errorf("%s comes before its directory %s", f.Name, d)
		}
		seen[f.Name] = true
		if f.Name == "init" {
			init = string(f.Data)
		}
	}
	// /init loads the modules Load orders, in that order.
	load, _ := Load(mods)
	last := -1
	for _, m := range load {
		i := strings.Index(init, m)
		if i <= last {
			t.Fatalf("/init loads %s out of order:\n%s", m, init)
		}
		last = i
	}
	if _, err := Build(cache, filepath.Join(dir, "nope"), mods); err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("missing busybox: err = %v, want a hint naming the package", err)
	}
}
