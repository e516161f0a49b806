#!/bin/sh
# Builds OpenWrt's real userland from pinned sources and assembles an
# OpenWrt root from it, for the tests and the lab (docs/hacking.md, "The
# real OpenWrt"): libubox, ubus, uci, udebug, ucode and its modules, rpcd
# with its plugins, uhttpd, lucihttp, ucode-mod-html, luci-base's core.so,
# rpcd-mod-luci, procd and netifd (with libnl-tiny), built with Debian's
# gcc against Debian's json-c; busybox is Debian's (the dynamic build:
# busybox-static runs its applets before the PATH's programs, as
# OpenWrt's does not), ip and tc Debian's iproute2. The root holds OpenWrt's package files (base-files,
# procd, netifd, ppp, uhttpd, rpcd, uci), LuCI (luci-base, the bootstrap
# theme, luci-mod-network/status/system, luci-app-sqm) and sqm-scripts
# installed by its own make. sqmkit is not in it: tests install it with
# `sqmkit install --root`.
#
#   scripts/openwrt-stack.sh        build (once per source set) and print the root's path
#
# Sources: $OPENWRT_SRC (default ../shared/openwrt-src beside the clone)
# holds `git archive` tarballs NAME-COMMIT.tar.xz; where it is absent the
# same commits are cloned from upstream. The result is cached outside the
# clone under $SQMKIT_CACHE (default ~/.cache/sqmkit)/openwrt-stack/HASH,
# HASH over the sources and this script, so a second clone on the same
# machine reuses it. Nothing of the sources is copied into the project.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
script=$repo/scripts/openwrt-stack.sh
src_dir=${OPENWRT_SRC:-$repo/../shared/openwrt-src}
cache_root=${SQMKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sqmkit}
jobs=$(nproc 2>/dev/null || echo 2)

# name, upstream, commit: the pinned set (the tarballs' names say the same).
pins="libubox https://github.com/openwrt/libubox.git 1aa36ee774
ubus https://github.com/openwrt/ubus.git 3cc98db1a4
uci https://github.com/openwrt/uci.git 66127cd76c
udebug https://github.com/openwrt/udebug.git 875e1a7af6
ucode https://github.com/jow-/ucode.git 81205a2543
rpcd https://github.com/openwrt/rpcd.git 4476687403
uhttpd https://github.com/openwrt/uhttpd.git f682ccabee
lucihttp https://github.com/jow-/lucihttp.git 9b5b683fbb
procd https://github.com/openwrt/procd.git 2c1834abae
netifd https://github.com/openwrt/netifd.git e97e36f9b5
libnl-tiny https://github.com/openwrt/libnl-tiny.git feca1d341d
openwrt https://github.com/openwrt/openwrt.git 8f8276a5b7
luci https://github.com/openwrt/luci.git d5950a9fa5
sqm-scripts https://github.com/tohojo/sqm-scripts.git 95337de67a"

log() { echo "openwrt-stack: $*" >&2; }

# The key: the tarballs' hashes when they are here, else the pins; and
# this script, whose steps make the result. Contents only, not paths: every
# clone shares one build (each prunes the others' keys).
key() {
	{
		cat "$script"
		if [ -d "$src_dir" ]; then
			echo "$pins" | while read -r name _ commit; do sha256sum <"$src_dir/$name-$commit.tar.xz"; done
		else
			echo "$pins"
		fi
		dpkg-query -W -f='${Package} ${Version}\n' libjson-c-dev iproute2 gcc 2>/dev/null || true
		apt-cache policy busybox 2>/dev/null | grep Candidate
	} | sha256sum | cut -c1-16
}

# One build at a time: go test runs openwrt/stack's and openwrt/test's
# packages at once, and on a cold cache both built in one work directory,
# each removing the other's (a CI run failed so). The second waits, then
# finds the first's done.
mkdir -p "$cache_root"
exec 9>"$cache_root/openwrt-stack.lock"
flock 9
out=$cache_root/openwrt-stack/$(key)
if [ -f "$out/done" ]; then
	echo "$out/root"
	exit 0
fi

work=$out.work
rm -rf "$work"
mkdir -p "$work/src" "$work/stage"
src=$work/src
stage=$work/stage

# shellcheck source=scripts/lib/pinned.sh
. "$repo/scripts/lib/pinned.sh"

# unpack NAME: the source tree of NAME at its pin, in $src/NAME.
unpack() {
	line=$(echo "$pins" | grep "^$1 ")
	pinned_unpack "$1" "$(echo "$line" | cut -d' ' -f2)" "$(echo "$line" | cut -d' ' -f3)" "$src/$1"
}

# Missing from glibc 2.36 (rpcd, procd): strlcpy and friends, from libbsd.
bsd="-include bsd/string.h"
# _GNU_SOURCE defined empty, as the sources that define it do (ucode's
# headers need vasprintf); ucode's own build defines it already.
gnu="-D_GNU_SOURCE="
cflags="-O2 -I$stage/usr/include -Wno-error"
ldflags="-L$stage/usr/lib -Wl,-rpath-link,$stage/usr/lib"

# cmake_build NAME [DIR] [CMAKE ARGS...]: configure, build and install
# into the stage.
cmake_build() {
	name=$1 dir=$2
	shift 2
	log "building $name"
	b=${builddir:-$work/build/$name}
	mkdir -p "$b"
	(cd "$b" && cmake -S "$dir" -B . -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib \
		-DCMAKE_PREFIX_PATH="$stage/usr" -DCMAKE_C_FLAGS="${extra_cflags:-} ${gnu_flag-$gnu} $cflags" \
		-DCMAKE_EXE_LINKER_FLAGS="$ldflags" -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" -DCMAKE_MODULE_LINKER_FLAGS="$ldflags" \
		-DCMAKE_C_STANDARD_LIBRARIES="${extra_libs:-}" "$@" >"$b/cmake.log" 2>&1 &&
		make -j"$jobs" >"$b/make.log" 2>&1 && make DESTDIR="$stage" install >>"$b/make.log" 2>&1) || {
		log "$name failed; the end of its log:"
		tail -n 30 "$b"/*.log >&2
		exit 1
	}
}

for p in $(echo "$pins" | cut -d' ' -f1); do unpack "$p"; done

cmake_build libubox "$src/libubox" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build ubus "$src/ubus" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build uci "$src/uci" -DBUILD_LUA=OFF
cmake_build libnl-tiny "$src/libnl-tiny"
gnu_flag="" cmake_build ucode "$src/ucode" -DUBUS_SUPPORT=ON -DUCI_SUPPORT=ON -DULOOP_SUPPORT=ON \
	-DRTNL_SUPPORT=OFF -DNL80211_SUPPORT=OFF -DDIGEST_SUPPORT=OFF -DZLIB_SUPPORT=OFF -DDEBUG_SUPPORT=OFF
cmake_build udebug "$src/udebug"
extra_cflags=$bsd extra_libs=-lbsd cmake_build rpcd "$src/rpcd" -DUCODE_SUPPORT=ON -DFILE_SUPPORT=ON -DIWINFO_SUPPORT=OFF -DRPCSYS_SUPPORT=ON
extra_cflags="-Wno-stringop-overread" cmake_build uhttpd "$src/uhttpd" -DUBUS_SUPPORT=ON -DUCODE_SUPPORT=ON -DTLS_SUPPORT=OFF -DLUA_SUPPORT=OFF
cmake_build lucihttp "$src/lucihttp" -DBUILD_LUA=OFF -DBUILD_UCODE=ON -DBUILD_TESTS=OFF
# no libiwinfo here: rpcd-mod-luci compiles against our declarations of it
extra_cflags="-I$stage/usr/include/libnl-tiny -I$src/rpcd/include -I$repo/scripts/openwrt-stack" cmake_build rpcd-mod-luci "$src/luci/libs/rpcd-mod-luci/src" -DLIBNL_LIBS=nl-tiny
mv "$stage/usr/lib/luci.so" "$stage/usr/lib/rpcd/luci.so"
# procd's CMakeLists adds -Werror after our flags, and gcc 12 warns where
# OpenWrt's toolchain does not: built without it (in the build's copy).
sed -i 's/-Werror//' "$src/procd/CMakeLists.txt"
extra_cflags=$bsd extra_libs=-lbsd cmake_build procd "$src/procd" -DSECCOMP_SUPPORT=OFF -DUTRACE_SUPPORT=OFF -DJAIL_SUPPORT=OFF \
	-DEARLY_PATH=/usr/sbin:/usr/bin:/sbin:/bin

# netifd reads ethtool's PSE attributes, newer than Debian 12's kernel
# headers (6.1): it builds against unstable's linux-libc-dev, fetched with
# private apt state, in its source tree (its generator runs as ./make_ethtool_modes_h.sh).
apt_dir=$cache_root/apt
# shellcheck source=scripts/lib/debian.sh
. "$repo/scripts/lib/debian.sh"
apt_update
mkdir -p "$work/headers"
(cd "$work/headers" && apt apt-get -qq download linux-libc-dev/unstable && dpkg-deb -x linux-libc-dev_*.deb .)
extra_cflags="-isystem $work/headers/usr/include -I$stage/usr/include/libnl-tiny" builddir=$src/netifd cmake_build netifd "$src/netifd"

log "building ucode-mod-html, luci-base's core.so"
mkdir -p "$stage/usr/lib/ucode/luci"
gcc -O2 -D_GNU_SOURCE= -I"$stage/usr/include" -fPIC -shared -o "$stage/usr/lib/ucode/html.so" "$src/luci/contrib/package/ucode-mod-html/src/html.c"
make -s -C "$src/luci/modules/luci-base/src" CFLAGS="-O2 -D_GNU_SOURCE= -I$stage/usr/include" FPIC=-fPIC LDFLAGS="-L$stage/usr/lib" compile jsmin po2lmo >/dev/null
cp "$src/luci/modules/luci-base/src/core.so" "$stage/usr/lib/ucode/luci/core.so"

# --- the root, laid out as OpenWrt's packages install their files ---
log "assembling the root"
root=$work/root
ow=$src/openwrt/package
luci=$src/luci
init_path=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p "$root"

# base-files, as its Package/base-files/install does: files, the version
# placeholders, %PATH%, the directories and links an image has (/var is /tmp).
cp -a "$ow/base-files/files/." "$root/"
sed -i -e 's/%D/OpenWrt/g' -e 's/%V/SNAPSHOT/g' -e 's/%R/r0-sqmkit-test/g' -e 's/%S/x86\/64/g' \
	-e 's/%A/x86_64/g' -e 's/%C/r0-sqmkit-test/g' -e 's/%t//g' -e 's/%[MmPh]//g' \
	"$root/etc/banner" "$root/etc/device_info" "$root/etc/openwrt_release" "$root/etc/openwrt_version" "$root/usr/lib/os-release"
sed -i "s#%PATH%#$init_path#g" "$root/sbin/hotplug-call" "$root/etc/preinit" "$root/etc/profile"
mkdir -p "$root/dev" "$root/etc/config" "$root/etc/crontabs" "$root/etc/rc.d" "$root/overlay" "$root/lib/firmware" \
	"$root/mnt" "$root/proc" "$root/tmp" "$root/usr/lib" "$root/usr/bin" "$root/sys" "$root/www"
mkdir -m 750 "$root/root"
ln -sf /proc/mounts "$root/etc/mtab"
rm -rf "${root:?}/var" && ln -s tmp "$root/var"
for l in resolv.conf TZ localtime; do ln -sf "/tmp/$l" "$root/etc/$l"; done
chmod 0600 "$root/etc/shadow"
chmod 1777 "$root/tmp"
# ubusd's package adds its user (USERID ubus=81:ubus=81)
echo 'ubus:*:81:81:ubus:/var/run/ubus:/bin/false' >>"$root/etc/passwd"
echo 'ubus:x:81:' >>"$root/etc/group"

# the built programs where their packages put them
s=$stage/usr
inst() { mkdir -p "$root/$2" && cp -a "$1" "$root/$2/"; }
for b in init procd askfirst udevtrigger upgraded; do inst "$s/sbin/$b" sbin; done
inst "$ow/system/procd/files/reload_config" sbin
inst "$ow/system/procd/files/service" sbin
cp "$ow/system/procd/files"/hotplug*.json "$root/etc/"
inst "$ow/system/procd/files/procd.sh" lib/functions
inst "$s/sbin/ubusd" sbin
inst "$s/bin/ubus" bin
inst "$s/bin/uci" sbin
cp -a "$ow/system/uci/files/." "$root/"
inst "$s/bin/jshn" usr/bin
inst "$s/share/libubox/jshn.sh" usr/share/libubox
for b in ucode ucc utpl; do [ -e "$s/bin/$b" ] && inst "$s/bin/$b" usr/bin; done
inst "$s/sbin/rpcd" sbin
cp "$ow/system/rpcd/files/rpcd.init" "$root/etc/init.d/rpcd"
cp "$ow/system/rpcd/files/rpcd.config" "$root/etc/config/rpcd"
inst "$src/rpcd/unauthenticated.json" usr/share/rpcd/acl.d
inst "$ow/system/rpcd/files/50-migrate-rpcd-ubus-sock.sh" etc/uci-defaults
inst "$s/bin/uhttpd" usr/sbin
cp "$ow/network/services/uhttpd/files/uhttpd.init" "$root/etc/init.d/uhttpd"
cp "$ow/network/services/uhttpd/files/uhttpd.config" "$root/etc/config/uhttpd"
sed -i "s/%D/OpenWrt/g" "$root/etc/config/uhttpd"
cp "$ow/network/services/uhttpd/files/ubus.default" "$root/etc/uci-defaults/00_uhttpd_ubus"
inst "$s/sbin/netifd" sbin
cp -a "$ow/network/config/netifd/files/." "$root/"
mkdir -p "$root/etc/udhcpc.user.d"
cp "$src/netifd/scripts/utils.sh" "$src/netifd/scripts/netifd-proto.sh" "$root/lib/netifd/"
# ppp's package files around Debian's pppd (its plugins under /usr/lib/pppd)
mkdir -p "$root/etc/ppp" "$root/lib/netifd/proto"
cp "$ow/network/services/ppp/files/etc/ppp/chap-secrets" "$ow/network/services/ppp/files/etc/ppp/filter" \
	"$ow/network/services/ppp/files/etc/ppp/options" "$root/etc/ppp/"
ln -sf /tmp/resolv.conf.ppp "$root/etc/ppp/resolv.conf"
cp "$ow/network/services/ppp/files/ppp.sh" "$root/lib/netifd/proto/"
cp "$ow/network/services/ppp/files/lib/netifd/ppp-up" "$ow/network/services/ppp/files/lib/netifd/ppp6-up" \
	"$ow/network/services/ppp/files/lib/netifd/ppp-down" "$root/lib/netifd/"
# libraries and plugins (ucode's modules, rpcd's and uhttpd's plugins,
# luci's core.so) keep the paths their builds compiled in
mkdir -p "$root/usr/lib"
cp -a "$s/lib"/*.so* "$root/usr/lib/"
rm -f "$root/usr/lib"/*.a
cp -a "$s/lib/ucode" "$s/lib/rpcd" "$root/usr/lib/"
[ -d "$s/share/ucode" ] && mkdir -p "$root/usr/share" && cp -a "$s/share/ucode" "$root/usr/share/"

# LuCI as luci.mk installs a package: htdocs under /www, root at /,
# ucode under /usr/share/ucode/luci; luci-base's postinst adds LuCI's
# ucode prefix to uhttpd.
for p in modules/luci-base modules/luci-mod-network modules/luci-mod-status modules/luci-mod-system \
	themes/luci-theme-bootstrap applications/luci-app-sqm; do
	d=$luci/$p
	[ -d "$d/htdocs" ] && cp -a "$d/htdocs/." "$root/www/"
	[ -d "$d/root" ] && cp -a "$d/root/." "$root/"
	[ -d "$d/ucode" ] && mkdir -p "$root/usr/share/ucode/luci" && cp -a "$d/ucode/." "$root/usr/share/ucode/luci/"
done
cp "$luci/modules/luci-base/src/version.uc" "$root/usr/share/ucode/luci/version.uc"
LD_LIBRARY_PATH="$s/lib" "$s/bin/uci" -c "$root/etc/config" add_list uhttpd.main.ucode_prefix='/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc'
LD_LIBRARY_PATH="$s/lib" "$s/bin/uci" -c "$root/etc/config" commit uhttpd

# sqm-scripts by its own make
log "installing sqm-scripts"
make -s -C "$src/sqm-scripts" install-openwrt DESTDIR="$root" PREFIX=/usr PLATFORM=openwrt >/dev/null

# busybox (Debian's, fetched, not installed: the host keeps its
# busybox-static) for every applet OpenWrt's own busybox would provide,
# where no real program is installed; Debian's iproute2 as ip-full and
# tc-full, util-linux's flock as busybox's flock applet.
(cd "$work" && apt-get download busybox >/dev/null && dpkg-deb -x busybox_*.deb "$work/busybox")
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
"$root/bin/busybox" --list-full | while read -r a; do
	n=$(basename "$a")
	for d in bin sbin usr/bin usr/sbin; do [ -e "$root/$d/$n" ] && continue 2; done
	mkdir -p "$root/$(dirname "$a")" && ln -s /bin/busybox "$root/$a"
done
for b in ip tc; do
	rm -f "$root/sbin/$b" "$root/usr/sbin/$b" "$root/bin/$b" "$root/usr/bin/$b"
done
cp "$(command -v ip)" "$root/sbin/ip"
cp "$(command -v tc)" "$root/usr/sbin/tc"
rm -f "$root/usr/bin/flock" "$root/bin/flock"
cp "$(command -v flock)" "$root/usr/bin/flock"
if command -v pppd >/dev/null; then
	cp "$(command -v pppd)" "$root/usr/sbin/pppd"
	cp -a /usr/lib/pppd "$root/usr/lib/"
fi

# glibc and the other shared libraries the programs need (OpenWrt's
# would be musl's), at the paths the loader looks in
log "copying shared libraries"
find "$root" -type f \( -perm -u+x -o -name '*.so*' \) | while read -r f; do
	file -b "$f" 2>/dev/null | grep -q '^ELF .*dynamic' || continue
	ldd "$f" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^\s*\(\/[^ ]*\) .*/\1/p'
done | sort -u | while read -r l; do
	case $l in "$root"/*) continue ;; esac
	[ -e "$root$l" ] && continue
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
done
printf '/usr/lib\n/lib\n' >"$root/etc/ld.so.conf"
ldconfig -r "$root"

# every service enabled, as the packages' default postinst does in an image
mkdir -p "$root/tmp/lock"
# shellcheck disable=SC2016 # expanded by the root's shell
chroot "$root" /bin/sh -c 'for s in /etc/init.d/*; do "$s" enable || exit 1; done'
rm -rf "${root:?}/tmp/lock"

rm -rf "$out"
mv "$work" "$out"
rm -rf "$out/src" "$out/build"
touch "$out/done"
# older builds of the stack (other sources, an older script) are not used again
for d in "$cache_root"/openwrt-stack/*; do [ "$d" = "$out" ] || rm -rf "$d"; done
log "ready in $out/root"
echo "$out/root"
