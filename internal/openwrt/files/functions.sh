# shellcheck shell=sh
# /usr/lib/sqmkit/functions.sh: what sqmkit's OpenWrt files share. Every
# path is under $IPKG_INSTROOT, OpenWrt's prefix for a root that is not the
# running one (empty on a router; a scratch root in the tests).

# sqmkit_run COMMAND [ARGS...] runs the sqmkit binary on this root.
sqmkit_run() {
	local cmd="$1"
	shift
	"$IPKG_INSTROOT/usr/bin/sqmkit" "$cmd" --root "${IPKG_INSTROOT:-/}" "$@"
}

# sqmkit_applied DEVICE says whether sqmkit's record holds something it
# applied on DEVICE.
sqmkit_applied() {
	[ -f "$IPKG_INSTROOT/var/run/sqmkit/applied/$1.json" ]
}

# sqmkit_defers says whether sqm-scripts' service is installed and enabled.
# Then it applies every queue of /etc/config/sqm (sqmkit's own through
# /usr/lib/sqm/sqmkit-*.qos), and sqmkit's service and hotplug leave the
# trees to it, so no queue is applied by both or torn down by the other;
# sqmkit's service still runs autorate.
sqmkit_defers() {
	local link
	[ -x "$IPKG_INSTROOT/etc/init.d/sqm" ] || return 1
	for link in "$IPKG_INSTROOT"/etc/rc.d/S??sqm; do
		[ -e "$link" ] && return 0
	done
	return 1
}

# sqmkit_log MESSAGE goes to the system log, as sqmkit's own lines do, and
# to stderr for whoever ran the init script.
sqmkit_log() {
	logger -s -t sqmkit "$*"
}
