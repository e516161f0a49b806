# shellcheck shell=sh
# /usr/lib/sqmkit/qos.sh: the sqm_start and sqm_stop that
# /usr/lib/sqm/sqmkit-*.qos give sqm-scripts. Its start-sqm and stop-sqm
# source the chosen script with the section's values exported (IFACE is its
# interface) and call these; sqmkit reads the same section from
# /etc/config/sqm, including the script name that picks its backend.

. "$IPKG_INSTROOT/usr/lib/sqmkit/functions.sh"

sqm_start() {
	# On a hotplug event, compare with the kernel and change only what
	# differs; from the service, apply afresh.
	if [ "$ACTION" = ifup ]; then
		sqmkit_run start --hotplug "$IFACE"
	else
		sqmkit_run start "$IFACE"
	fi
}

sqm_stop() {
	# sqm-scripts' hotplug stops and starts again on every ifup (wan6's
	# too): while the device is there, leave the tree to the start that
	# follows, which changes nothing when nothing changed.
	if [ "$ACTION" = ifup ] && [ -d "$IPKG_INSTROOT/sys/class/net/$IFACE" ]; then
		return 0
	fi
	sqmkit_run stop "$IFACE"
}

# stop-sqm's cleanup would delete the IFB under the redirect; sqmkit's stop
# removes the redirect first.
sqm_cleanup() {
	sqmkit_run stop "$IFACE"
}
