#!/bin/sh
# Builds goresponsiveness (the responsiveness client of the IETF draft's
# authors) at its pinned commit with the Go module proxy, and prints the
# binary's path: the reference client the tests compare sqmkit's RPM with
# (TestReferenceResponsivenessServer). Sources as scripts/lib/pinned.sh
# says; the binary is cached outside the clone under $SQMKIT_CACHE
# (default ~/.cache/sqmkit)/goresponsiveness/COMMIT.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
src_dir=${OPENWRT_SRC:-$repo/../shared/openwrt-src}
cache_root=${SQMKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sqmkit}
commit=3439542850
out=$cache_root/goresponsiveness/$commit
if [ -x "$out/networkQuality" ]; then
	echo "$out/networkQuality"
	exit 0
fi
# shellcheck source=scripts/lib/pinned.sh
. "$repo/scripts/lib/pinned.sh"
work=$out.work
rm -rf "$work"
mkdir -p "$work"
pinned_unpack goresponsiveness https://github.com/network-quality/goresponsiveness.git "$commit" "$work/src"
echo "goresponsiveness: building $commit" >&2
(cd "$work/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$work/networkQuality" .)
mkdir -p "$out"
mv "$work/networkQuality" "$out/networkQuality"
rm -rf "$work"
echo "$out/networkQuality"
