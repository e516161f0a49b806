#!/bin/sh
# Stand-in for sqm-scripts' run.sh in the tests, with what the package meets:
# it sets ACTION to its first argument (start by default), so a handler's
# ACTION=ifup never reaches start-sqm and stop-sqm; `cleanup` is a stop
# with CLEANUP=1, which the state file's CLEANUP="0" then overrides; a
# stop runs stop-sqm with the IFACE and SCRIPT its state file recorded at
# start (all state files without an interface); a start runs start-sqm for
# each enabled queue section on the interface (or all) without a state file.
. "$IPKG_INSTROOT/lib/functions.sh"

ACTION=${1:-start}
RUN_IFACE=$2
STATE="$IPKG_INSTROOT/var/run/sqm"
CLEANUP=0
if [ "$ACTION" = cleanup ]; then
	CLEANUP=1
	ACTION=stop
fi
mkdir -p "$STATE"

stop_state() {
	[ -f "$1" ] || return 0
	(
		# shellcheck source=/dev/null
		. "$1"
		IFACE=$IFACE SCRIPT=$SCRIPT CLEANUP=$CLEANUP "$IPKG_INSTROOT/usr/lib/sqm/stop-sqm"
	)
}

start_section() {
	export IFACE
	IFACE=$(config_get "$1" interface)
	[ -z "$RUN_IFACE" ] || [ "$RUN_IFACE" = "$IFACE" ] || return 0
	[ "$(config_get "$1" enabled)" = 1 ] || return 0
	[ -f "$STATE/$IFACE.state" ] && return 0
	export UPLINK DOWNLINK SCRIPT QDISC
	UPLINK=$(config_get "$1" upload)
	DOWNLINK=$(config_get "$1" download)
	SCRIPT=$(config_get "$1" script)
	QDISC=$(config_get "$1" qdisc)
	"$IPKG_INSTROOT/usr/lib/sqm/start-sqm"
}

if [ "$ACTION" = stop ]; then
	if [ -n "$RUN_IFACE" ]; then
		stop_state "$STATE/$RUN_IFACE.state"
	else
		for f in "$STATE"/*.state; do stop_state "$f"; done
	fi
else
	config_load sqm
	config_foreach start_section queue
fi
