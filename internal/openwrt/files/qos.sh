# shellcheck shell=sh
# /usr/lib/sqmkit/qos.sh: the sqm_start and sqm_stop that
# /usr/lib/sqm/sqmkit-*.qos give sqm-scripts. Its start-sqm and stop-sqm
# source the chosen script with the section's values exported (IFACE is its
# interface, SCRIPT its script) and call these; sqmkit reads the same
# section from /etc/config/sqm, selected by interface and script, never by
# section name. sqm-scripts' run.sh sets ACTION to start or stop, hiding
# the hotplug event; netifd's INTERFACE, which it leaves, tells an
# interface event from a service start.

. "$IPKG_INSTROOT/usr/lib/sqmkit/functions.sh"

sqm_start() {
	# On an interface event, compare with the kernel and change only what
	# differs; from the service, apply afresh.
	sqmkit_run start ${INTERFACE:+--hotplug} --by-interface -- "$IFACE" && return 0
	# One direction failed but the other is shaped: report a start, so
	# sqm-scripts keeps its state file and its stop removes the tree.
	sqmkit_applied "$IFACE"
}

sqm_stop() {
	# sqm-scripts' hotplug stops and starts every queue on each ifup (wan6's
	# too). sqmkit leaves a tree that is still configured for it in place;
	# the start that follows finds it as planned.
	sqmkit_run stop ${INTERFACE:+--hotplug} --by-interface -- "$IFACE"
}

# run.sh's cleanup reaches stop-sqm with CLEANUP reset from its state file,
# so sqm_stop does everything; this is for a direct CLEANUP=1 stop-sqm.
sqm_cleanup() {
	sqmkit_run stop --by-interface -- "$IFACE"
}
