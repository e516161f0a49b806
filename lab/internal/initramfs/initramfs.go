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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// roots are the modules /init needs to mount the host's root over 9p; Load
// adds what modules.dep says they need, and leaves out those the kernel
// has built in (Debian's 7.x builds virtio in, 6.1 does not).
var roots = []string{"virtio_pci", "9pnet_virtio", "9p"}

// Load lists the module files (relative to modDir) /init loads, in an
// order where each needs only the ones before it: modules.dep lists a
// module's dependencies with the ones loaded first last, as modprobe
// reads it (TestLoadOrder).
func Load(modDir string) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("guest kernel modules: %w (install linux-image-amd64, or run scripts/kernels.sh)", err)
	}
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[modName(l)] = true
	}
	deps, byName := map[string][]string{}, map[string]string{}
	for _, l := range strings.Split(string(dep), "\n") {
		m, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		deps[m], byName[modName(m)] = strings.Fields(rest), m
	}
	var order []string
	seen := map[string]bool{}
	var add func(path string)
	add = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		ds := deps[path]
		for i := len(ds) - 1; i >= 0; i-- {
			add(ds[i])
		}
		order = append(order, path)
	}
	for _, name := range roots {
		switch path, ok := byName[name]; {
		case ok:
			add(path)
		case !isBuiltin[name]:
			return nil, fmt.Errorf("guest kernel %s has no module %s and does not build it in", modDir, name)
		}
	}
	return order, nil
}

// modName is a module's name from its path: kernel/fs/9p/9p.ko.xz -> 9p.
func modName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i > 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// uncompressed reads a module file, decompressing .ko.xz and .ko.zst (the
// initramfs's busybox insmod takes plain ELF), and returns its name
// without the compression suffix.
func uncompressed(modDir, path string) (name string, data []byte, err error) {
	full := filepath.Join(modDir, path)
	switch {
	case strings.HasSuffix(path, ".ko.xz"):
		data, err = exec.Command("xz", "-dc", full).Output()
	case strings.HasSuffix(path, ".ko.zst"):
		data, err = exec.Command("zstd", "-dcq", full).Output()
	default:
		data, err = os.ReadFile(full)
	}
	if err != nil {
		return "", nil, fmt.Errorf("guest kernel module %s: %w (xz-utils and zstd decompress them)", full, err)
	}
	return path[:strings.Index(path, ".ko")+3], data, nil
}

// Mount tags of the two 9p exports the VM gets.
const (
	TagRoot    = "hostroot"
	TagResults = "results"
)

// Init is the guest's /init. The kernel passes unknown `key=value` boot
// parameters to it as environment: labresults (the host path of the
// writable export, mounted at the same path so paths agree on both sides),
// labcmd (what to run after switch_root, with ':' for spaces), labmods (a
// host directory of the kernel's modules, when not under /lib/modules) and
// labpath (a host directory put first in PATH).
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
# The guest's own /tmp and /run hide the host's: labmods and labpath (a
# clone of the repo under /tmp keeps both in its lab/.cache) are held
# before they are covered and put back at their paths after.
$B mkdir -p /keep/mods /keep/path
[ -z "$labmods" ] || $B mount --bind "/mnt$labmods" /keep/mods || $B poweroff -f
[ -z "$labpath" ] || $B mount --bind "/mnt$labpath" /keep/path || $B poweroff -f
$B mount -t tmpfs tmp /mnt/tmp
$B mount -t tmpfs run /mnt/run
if [ -n "$labpath" ]; then
	$B mkdir -p "/mnt$labpath" 2>/dev/null
	$B mount --move /keep/path "/mnt$labpath" || $B poweroff -f
fi
$B mkdir -p "/mnt$labresults" 2>/dev/null
$B mount -t 9p -o $o ` + TagResults + ` "/mnt$labresults" || $B poweroff -f
# A kernel the host does not run keeps its modules elsewhere (labmods): the
# guest's modprobe finds them at the usual place, over the host's.
if [ -n "$labmods" ]; then
	$B mount -t tmpfs mods /mnt/lib/modules
	$B mkdir -p "/mnt/lib/modules/$($B uname -r)"
	$B mount --move /keep/mods "/mnt/lib/modules/$($B uname -r)" || $B poweroff -f
fi
for d in proc sys dev; do $B mount --move /$d /mnt/$d; done
cmd=$(echo "$labcmd" | $B tr ':' ' ')
# labpath goes first in PATH: the tc that knows the kernel's newer qdiscs
exec $B switch_root /mnt /bin/sh -c "PATH=${labpath:+$labpath:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp $cmd; echo o > /proc/sysrq-trigger; sleep 60 2>/dev/null"
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
	load, err := Load(modDir)
	if err != nil {
		return nil, err
	}
	for _, path := range load {
		m, data, err := uncompressed(modDir, path)
		if err != nil {
			return nil, err
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
