#!/bin/sh
# Fetches the lab's guest kernels that the host does not have, and a tc
# that knows cake_mq, into lab/.cache (or $LAB_CACHE) without touching the
# host's package sources, installed kernel or tc:
#
#   scripts/kernels.sh 6.12   Debian 13's 6.12 (the series OpenWrt 25.12 runs)
#   scripts/kernels.sh 7      unstable's newest 7.x (cake_mq is in mainline since 7.0)
#   scripts/kernels.sh tc     tc from iproute2 7.2.0's Debian source (cake_mq since 7.1)
#
# Each kernel lands in lab/.cache/kernels/SERIES/ with kernel.env (KERNEL,
# MODULES, RELEASE) for sqmkit-lab --kernel SERIES, tc in
# lab/.cache/iproute2-VERSION/bin with lab/.cache/tc.env (TC); each step
# runs again only when its file is missing. apt runs with private state
# under lab/.cache/apt.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAB_CACHE:-$repo/lab/.cache}

# iproute2's upstream tarball as Debian's pool serves it, pinned by hash.
ip2_version=7.2.0
ip2_sha256=4c2fa124c2cf0afd7ca34d1eeacba6ba048a56f6374e2aab93dafbdbd4eea9c0

apt_dir=$cache/apt
# shellcheck source=scripts/lib/debian.sh
. "$repo/scripts/lib/debian.sh"

# newest PATTERN: the newest version of the packages whose names match the
# extended regex PATTERN, as "name version" lines.
newest() {
	apt apt-cache search --names-only "$1" | cut -d' ' -f1 |
		while read -r p; do echo "$p $(apt apt-cache show "$p" | sed -n 's/^Version: //p' | head -n1)"; done |
		sort -k2,2V | tail -n1
}

fetch_kernel() {
	series=$1
	dir=$cache/kernels/$series
	[ -f "$dir/kernel.env" ] && return 0
	apt_update
	case $series in
	6.12) set -- "$(newest '^linux-image-6\.12\.[0-9]+\+deb13-amd64$')" ;;
	7) set -- "$(newest '^linux-binary-7\.[0-9.]+\+deb[0-9]+-amd64$')" ;;
	*) echo "kernels.sh: unknown kernel series $series (6.12 or 7)" >&2; exit 2 ;;
	esac
	[ -n "${1% }" ] || { echo "kernels.sh: Debian serves no $series kernel now" >&2; exit 1; }
	pkg=${1% *} version=${1#* }
	release=${pkg#linux-image-}
	release=${release#linux-binary-}
	pkgs=$pkg
	case $pkg in linux-binary-*) pkgs="$pkg linux-modules-$release linux-base-$release" ;; esac
	echo "kernels.sh: fetching $pkgs ($version)" >&2
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/debs" "$dir.tmp/root"
	# shellcheck disable=SC2086 # pkgs is a list of package names
	(cd "$dir.tmp/debs" && apt apt-get -qq download $pkgs)
	for d in "$dir.tmp"/debs/*.deb; do dpkg-deb -x "$d" "$dir.tmp/root"; done
	rm -rf "$dir.tmp/debs"
	mods=$dir.tmp/root/usr/lib/modules/$release
	[ -d "$mods" ] || mods=$dir.tmp/root/lib/modules/$release
	kernel=$dir.tmp/root/boot/vmlinuz-$release
	[ -f "$kernel" ] || kernel=$mods/vmlinuz
	if [ ! -f "$kernel" ] || [ ! -d "$mods" ]; then
		echo "kernels.sh: no vmlinuz or modules in $pkgs" >&2
		exit 1
	fi
	depmod -b "${mods%/lib/modules/*}" "$release"
	rm -rf "$dir" && mv "$dir.tmp" "$dir"
	mods=$dir${mods#"$dir.tmp"} kernel=$dir${kernel#"$dir.tmp"}
	printf 'KERNEL=%s\nMODULES=%s\nRELEASE=%s\nPACKAGES=%s\nVERSION=%s\n' "$kernel" "$mods" "$release" "$pkgs" "$version" >"$dir/kernel.env"
	echo "kernels.sh: $series is $release in $dir" >&2
}

build_tc() {
	out=$cache/iproute2-$ip2_version
	if [ -x "$out/bin/tc" ]; then
		printf 'TC=%s\n' "$out/bin" >"$cache/tc.env"
		return 0
	fi
	src=$cache/src
	mkdir -p "$src"
	tarball=$src/iproute2_$ip2_version.orig.tar.xz
	if ! echo "$ip2_sha256  $tarball" | sha256sum -c --status 2>/dev/null; then
		/usr/lib/apt/apt-helper -o APT::Sandbox::User=root -qq download-file "$mirror/pool/main/i/iproute2/iproute2_$ip2_version.orig.tar.xz" "$tarball" "SHA256:$ip2_sha256"
	fi
	rm -rf "$src/iproute2-$ip2_version"
	tar -xJf "$tarball" -C "$src"
	echo "kernels.sh: building tc from iproute2 $ip2_version" >&2
	(cd "$src/iproute2-$ip2_version" && ./configure >/dev/null && make -s -j"$(nproc)" SUBDIRS="lib tc" >/dev/null)
	mkdir -p "$out/bin"
	cp "$src/iproute2-$ip2_version/tc/tc" "$out/bin/tc"
	rm -rf "$src/iproute2-$ip2_version"
	"$out/bin/tc" -V >&2
	printf 'TC=%s\n' "$out/bin" >"$cache/tc.env"
}

[ $# -gt 0 ] || { echo "usage: scripts/kernels.sh 6.12|7|tc ..." >&2; exit 2; }
for what in "$@"; do
	case $what in
	tc) build_tc ;;
	*) fetch_kernel "$what" ;;
	esac
done
