# A recorder standing in for OpenWrt's /lib/functions/procd.sh in the tests:
# instead of sending the service description to procd over ubus, it writes
# one line per request to $PROCD_LOG, so a test can assert on what the init
# script asked of procd: the service, its instances' command lines and
# respawn, the reload triggers, and kills.

_procd_log() { echo "$*" >>"${PROCD_LOG:-/dev/null}"; }

procd_open_service() { _procd_log "open_service $*"; }
procd_close_service() {
	# procd reads the triggers when the service is sent, as here
	service_triggers
	_procd_log "close_service ${1:-set}"
}
procd_open_instance() { _procd_log "open_instance $*"; }
procd_set_param() { _procd_log "set_param $*"; }
procd_append_param() { _procd_log "append_param $*"; }
procd_close_instance() { _procd_log "close_instance"; }
procd_add_reload_trigger() { _procd_log "reload_trigger $*"; }
procd_kill() { _procd_log "kill $*"; }
