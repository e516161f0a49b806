#!/bin/sh
# make harsh: every unit, host-namespace and browser test COUNT times, four
# test binaries at once, beside one busy loop per core at normal priority:
# more load than make test puts on itself. A test that asserts on how much
# CPU, wall time or scheduling it got fails here before it flakes in CI.
# The browser's module is a module of its own: it runs after the main one.
set -u
count=${1:-5}
go=${GO:-go}
loops=""
trap 'kill $loops 2>/dev/null' EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$(nproc)"); do
	sh -c 'while :; do :; done' &
	loops="$loops $!"
done
start=$(date +%s)
rc=0
$go test -count="$count" -p 4 -timeout 180m ./... || rc=1
(cd openwrt/browser && $go test -count="$count" -p 4 -timeout 90m ./...) || rc=1
echo "make harsh: -count=$count -p 4 beside $(nproc) busy loops: $(($(date +%s) - start)) s, rc $rc"
exit $rc
