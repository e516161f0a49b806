#!/bin/sh
# Builds the router binary (build tag router, as the OpenWrt feed builds
# it: GO_PKG_TAGS) for the router architectures, named as `sqmkit install`
# users fetch them: sqmkit-<the first part of OpenWrt's DISTRIB_ARCH>
# (aarch64, arm, mipsel, mips, and x86 for x86_64), with SHA256SUMS beside them in
# bin/release. Checks each against the size budget: at most 6 MB stripped
# and 2.5 MB xz-compressed. Prints one line per architecture; exits 1 when
# one is over.
set -eu
cd "$(dirname "$0")/.."
max_bin=6000000
max_xz=2500000
out=${BIN:-bin}/release
mkdir -p "$out"
rc=0
# OpenWrt arch : GOARCH : GOARM or GOMIPS
for target in aarch64:arm64: arm:arm:7 mipsel:mipsle:softfloat mips:mips:softfloat x86:amd64:; do
	owrt=${target%%:*}
	rest=${target#*:}
	arch=${rest%%:*}
	variant=${rest#*:}
	name="$out/sqmkit-$owrt"
	case $arch in
	mips*) set -- GOMIPS="$variant" ;;
	arm) set -- GOARM="$variant" ;;
	*) set -- ;;
	esac
	env CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$@" \
		go build -tags router -trimpath -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$name" ./cmd/sqmkit
	bytes=$(wc -c <"$name")
	xzbytes=$(xz -9e -c "$name" | wc -c)
	verdict=ok
	if [ "$bytes" -gt "$max_bin" ] || [ "$xzbytes" -gt "$max_xz" ]; then
		verdict="OVER BUDGET ($max_bin stripped, $max_xz xz)"
		rc=1
	fi
	echo "router build $name (linux/$arch${variant:+ $variant}): $bytes bytes stripped, $xzbytes bytes xz: $verdict"
done
(cd "$out" && sha256sum sqmkit-* >SHA256SUMS)
exit $rc
