// Package initramfs builds the lab guest's initramfs: busybox, the virtio
// and 9p modules, and an /init that mounts the host's root read-only over
// 9p and hands over to the lab binary. The guest then runs every host
// program (ip, tc, sqmkit) without an image to maintain.
package initramfs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Modules are loaded by /init in this order: each needs only the ones
// before it (modules.dep of the Debian 6.1 kernel).
var Modules = []string{
	"kernel/drivers/virtio/virtio_ring.ko",
	"kernel/drivers/virtio/virtio.ko",
	"kernel/drivers/virtio/virtio_pci_modern_dev.ko",
	"kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
	"kernel/drivers/virtio/virtio_pci.ko",
	"kernel/net/9p/9pnet.ko",
	"kernel/net/9p/9pnet_virtio.ko",
	"kernel/fs/netfs/netfs.ko",
	"kernel/fs/fscache/fscache.ko",
	"kernel/fs/9p/9p.ko",
}

// Mount tags of the two 9p exports the VM gets.
const (
	TagRoot    = "hostroot"
	TagResults = "results"
)

// Init is the guest's /init. The kernel passes unknown `key=value` boot
// parameters to it as environment: labresults (the host path of the
// writable export, mounted at the same path so paths agree on both sides)
// and labcmd (what to run after switch_root, with ':' for spaces).
const Init = `#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
$B mkdir -p /dev/pts
$B mount -t devpts devpts /dev/pts
# what udev would add: bash's process substitution needs /dev/fd
$B ln -s /proc/self/fd /dev/fd
$B ln -s /proc/self/fd/0 /dev/stdin
$B ln -s /proc/self/fd/1 /dev/stdout
$B ln -s /proc/self/fd/2 /dev/stderr
for m in ` + "MODULES" + `; do
	$B insmod /lib/modules/$m || { echo "lab-init: insmod $m failed"; $B poweroff -f; }
done
o=trans=virtio,version=9p2000.L,msize=512000
# The host root is read-only and nothing changes it during a run: cache
# it like a router caches its root filesystem, so a program run twice is
# read over 9p once (cache=none would read it again on every exec).
$B mount -t 9p -o ro,cache=loose,$o ` + TagRoot + ` /mnt || $B poweroff -f
$B mount -t tmpfs tmp /mnt/tmp
$B mount -t tmpfs run /mnt/run
$B mkdir -p "/mnt$labresults" 2>/dev/null
$B mount -t 9p -o $o ` + TagResults + ` "/mnt$labresults" || $B poweroff -f
for d in proc sys dev; do $B mount --move /$d /mnt/$d; done
cmd=$(echo "$labcmd" | $B tr ':' ' ')
exec $B switch_root /mnt /bin/sh -c "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp $cmd; echo o > /proc/sysrq-trigger; sleep 60 2>/dev/null"
`

// File is one archive member. Mode holds the type bits (0o100000 regular,
// 0o40000 directory, 0o20000 character device).
type File struct {
	Name         string
	Mode         uint32
	Data         []byte
	Major, Minor uint32 // device numbers for device nodes
}

// WriteCPIO writes files as a gzip-compressed cpio "newc" archive, the
// format the kernel unpacks into its rootfs.
func WriteCPIO(w io.Writer, files []File) error {
	zw := gzip.NewWriter(w)
	for i, f := range append(files, File{Name: "TRAILER!!!"}) {
		name := f.Name + "\x00"
		hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			i+1, f.Mode, 0, 0, 1, 0, len(f.Data), 0, 0, f.Major, f.Minor, len(name), 0)
		if _, err := io.WriteString(zw, hdr+name+pad(len(hdr)+len(name))); err != nil {
			return err
		}
		if _, err := zw.Write(f.Data); err != nil {
			return err
		}
		if _, err := io.WriteString(zw, pad(len(f.Data))); err != nil {
			return err
		}
	}
	return zw.Close()
}

func pad(n int) string { return strings.Repeat("\x00", (4-n%4)%4) }

// Files lists the archive for a kernel whose modules live in modDir.
func Files(busybox, modDir string) ([]File, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w (install busybox-static)", err)
	}
	fs := []File{
		{Name: "bin", Mode: 0o40755}, {Name: "dev", Mode: 0o40755}, {Name: "proc", Mode: 0o40755},
		{Name: "sys", Mode: 0o40755}, {Name: "mnt", Mode: 0o40755},
		// The kernel opens /dev/console before /init runs; without it
		// /init has no stdout.
		{Name: "dev/console", Mode: 0o20600, Major: 5, Minor: 1},
		{Name: "bin/busybox", Mode: 0o100755, Data: bb},
	}
	dirs := map[string]bool{}
	var names []string
	for _, m := range Modules {
		data, err := os.ReadFile(filepath.Join(modDir, m))
		if err != nil {
			return nil, fmt.Errorf("guest kernel module: %w (install linux-image-amd64)", err)
		}
		for d := filepath.Dir("lib/modules/" + m); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
		fs = append(fs, File{Name: "lib/modules/" + m, Mode: 0o100644, Data: data})
		names = append(names, m)
	}
	var ds []File
	for d := range dirs {
		ds = append(ds, File{Name: d, Mode: 0o40755})
	}
	// A parent's name sorts before its children's, so it is created first.
	slices.SortFunc(ds, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	init := strings.Replace(Init, "MODULES", strings.Join(names, " "), 1)
	fs = append(fs, File{Name: "init", Mode: 0o100755, Data: []byte(init)})
	return append(ds, fs...), nil
}

// Build returns the path of the initramfs for the given inputs under
// cacheDir, writing it only when no archive with the same content hash
// exists yet.
func Build(cacheDir, busybox, modDir string) (string, error) {
	fs, err := Files(busybox, modDir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range fs {
		fmt.Fprintf(h, "%s %o %d:%d %d\n", f.Name, f.Mode, f.Major, f.Minor, len(f.Data))
		h.Write(f.Data)
	}
	path := filepath.Join(cacheDir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio.gz")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	var buf bytes.Buffer
	if err := WriteCPIO(&buf, fs); err != nil {
		return "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}
