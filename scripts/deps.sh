#!/bin/sh
# Installs the Debian packages that the tests, the lab and the demo need, and
# nothing when they are all present (so `make test` stays fast on a warm box).
set -eu
# kmod, zstd and debian-archive-keyring: the newer guest kernels
# scripts/kernels.sh fetches (their signatures, depmod, compressed modules);
# gcc, make, libc6-dev, bison, flex, pkg-config, libmnl-dev: the tc it builds from
# iproute2's source for them (cake_mq); chromium: the browser tests of
# luci-app-sqmkit's pages (openwrt/browser); cmake, libjson-c-dev,
# libbsd-dev, file and git: OpenWrt's userland built from its pinned sources
# (scripts/openwrt-stack.sh); nginx: the reference responsiveness server's
# setup (TestReferenceResponsivenessServer runs its own nginx in a test
# namespace; the system's nginx service is not wanted and is stopped);
# openssl: the client that asks nginx for each cipher (TestChaChaWithoutAES);
# ca-certificates: /etc/ssl/certs, which the tests of the default server
# cover with a CA of their own (refserver.Confined).
pkgs="iproute2 ethtool iperf3 irtt fping flent python3-matplotlib qemu-system-x86 linux-image-amd64 busybox-static pppoe ppp util-linux procps shellcheck xz-utils zstd iputils-ping kmod gcc make libc6-dev bison flex pkg-config libmnl-dev debian-archive-keyring chromium cmake libjson-c-dev libbsd-dev file git qemu-user nginx openssl ca-certificates"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # missing is a list of package names
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
case "$missing" in *nginx*) $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true ;; esac
