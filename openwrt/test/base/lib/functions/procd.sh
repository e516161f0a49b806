# Stand-in for OpenWrt's /lib/functions/procd.sh in the tests. It builds the
# same JSON message the real one builds with jshn and sends it the same
# way, `ubus call service set|add|delete MESSAGE` (ubus is a recorder in the
# tests): {"name","script","instances":{NAME:{"command":[...],
# "respawn":[...],"stderr":true}},"triggers":[...],"data":{}}. Only what
# sqmkit's init script uses is here.

_procd_q() {
	printf '"%s"' "$(printf '%s' "$1" | sed 's/[\\"]/\\&/g')"
}

_procd_array() {
	_pa=
	for _pv in "$@"; do
		_pa="$_pa${_pa:+,}$(_procd_q "$_pv")"
	done
	printf '[%s]' "$_pa"
}

procd_open_service() {
	_procd_name=$1
	_procd_msg="\"name\":$(_procd_q "$1")"
	[ -n "$2" ] && _procd_msg="$_procd_msg,\"script\":$(_procd_q "$2")"
	_procd_instances=
	_procd_triggers=
	_procd_seq=0
}

procd_open_instance() {
	_procd_seq=$((_procd_seq + 1))
	_procd_inst="$(_procd_q "${1:-instance$_procd_seq}"):{"
	_procd_params=
}

procd_set_param() {
	_pt=$1
	shift
	case "$_pt" in
	command | netdev | file | respawn | watch) _pj=$(_procd_array "$@") ;;
	stdout | stderr | no_new_privs) if [ "$1" = 1 ]; then _pj=true; else _pj=false; fi ;;
	nice | term_timeout) _pj=$1 ;;
	*) _pj=$(_procd_q "$1") ;;
	esac
	_procd_params="$_procd_params${_procd_params:+,}\"$_pt\":$_pj"
}

procd_close_instance() {
	_procd_instances="$_procd_instances${_procd_instances:+,}$_procd_inst$_procd_params}"
}

procd_add_reload_trigger() {
	for _pf in "$@"; do
		_pt="[\"config.change\",[\"if\",[\"eq\",\"package\",$(_procd_q "$_pf")],[\"run_script\",\"/etc/init.d/$_procd_name\",\"reload\"]],1000]"
		_procd_triggers="$_procd_triggers${_procd_triggers:+,}$_pt"
	done
}

procd_close_service() {
	service_triggers
	service_data
	ubus call service "${1:-set}" "{$_procd_msg,\"instances\":{$_procd_instances},\"triggers\":[$_procd_triggers],\"data\":{}}"
}

procd_kill() {
	_pk="\"name\":$(_procd_q "$1")"
	[ -n "$2" ] && _pk="$_pk,\"instance\":$(_procd_q "$2")"
	ubus call service delete "{$_pk}"
}
