#!/bin/sh
# Builds the router binary (build tag router, as the OpenWrt feed builds
# it: GO_PKG_TAGS) for every OpenWrt architecture Go builds, named as
# `sqmkit install` users fetch them: sqmkit-<the first part of OpenWrt's
# DISTRIB_ARCH> (x86 for x86_64, whose name is cut at its underscore), with
# SHA256SUMS beside them in bin/release. One file per family keeps the
# README's one-line fetch: arm is GOARM=5 (soft float, the kernel's atomic
# helpers), which runs on ARMv5, v6 and v7 alike; sqmkit's data path does
# no floating point. i386 and the MIPS are soft float too (pentium-mmx has
# no SSE2; OpenWrt's MIPS targets build without an FPU). Go has no port
# for ARMv4 (arm_fa526) or OpenWrt's 32-bit and e5500 PowerPC.
# Checks each against the size budget: at most 2.5 MB xz-compressed (the
# flash's figure: squashfs and the jffs2/ubifs overlay store it
# compressed) and 9 MB stripped (what it takes unpacked, as `sqmkit install`
# runs it from a tmpfs /tmp; TLS and its certificate checks, for the public
# test servers, are 2.3 MB of it; once installed, only the pages it touches
# are in RAM; the MIPS linkers align segments to 64 KiB, so that figure
# moves in 64 KiB steps). x86 and i386 are held to 3 MB xz instead: OpenWrt's
# x86 images boot from a disk (their root partition is 104 MB by default), not
# a flash chip, and x86-64's code is the largest, so the flash figure would be
# spent there first on growth no flash router carries. Prints one line per architecture; exits 1 when one is over. openwrt/test's TestReadmeInstallCommands maps every DISTRIB_ARCH
# of OpenWrt 24.10 and 25.12 through the README's command onto this list.
set -eu
cd "$(dirname "$0")/.."
max_bin=9000000
max_xz=2500000
max_xz_disk=3000000
out=${BIN:-bin}/release
mkdir -p "$out"
rc=0
# OpenWrt arch : GOARCH : GOARM, GOMIPS, GOMIPS64 or GO386
for target in aarch64:arm64: arm:arm:5 mipsel:mipsle:softfloat mips:mips:softfloat mips64:mips64:softfloat mips64el:mips64le:softfloat i386:386:softfloat riscv64:riscv64: loongarch64:loong64: x86:amd64:; do
	owrt=${target%%:*}
	rest=${target#*:}
	arch=${rest%%:*}
	variant=${rest#*:}
	name="$out/sqmkit-$owrt"
	case $arch in
	mips64*) set -- GOMIPS64="$variant" ;;
	mips*) set -- GOMIPS="$variant" ;;
	arm) set -- GOARM="$variant" ;;
	386) set -- GO386="$variant" ;;
	*) set -- ;;
	esac
	env CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$@" \
		go build -tags router -trimpath -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$name" ./cmd/sqmkit
	bytes=$(wc -c <"$name")
	xzbytes=$(xz -9e -c "$name" | wc -c)
	most_xz=$max_xz
	case $owrt in x86 | i386) most_xz=$max_xz_disk ;; esac
	verdict=ok
	if [ "$bytes" -gt "$max_bin" ] || [ "$xzbytes" -gt "$most_xz" ]; then
		verdict="OVER BUDGET ($max_bin stripped, $most_xz xz)"
		rc=1
	fi
	echo "router build $name (linux/$arch${variant:+ $variant}): $bytes bytes stripped, $xzbytes bytes xz: $verdict"
done
(cd "$out" && sha256sum sqmkit-* >SHA256SUMS)
exit $rc
