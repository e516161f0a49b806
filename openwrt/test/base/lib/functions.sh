# Stand-in for OpenWrt's /lib/functions.sh in the tests: what rc.common and
# the sqm-scripts stand-ins use. config_load reads
# $IPKG_INSTROOT/etc/config/NAME itself (the real one loads nothing under
# an IPKG_INSTROOT and asks uci on a router, with the same result there):
# sections get CONFIG_<section>_<option> variables, anonymous ones cfgN
# names, and config_foreach walks them in file order.

list_contains() {
	_lc=
	eval "_lc=\" \${$1} \""
	case "$_lc" in *" $2 "*) return 0 ;; esac
	return 1
}

config_load() {
	CONFIG_SECTIONS=
	_cl=$(awk -v q="'" '
		function val(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); if (s ~ /^["\047].*["\047]$/) s = substr(s, 2, length(s) - 2); return s }
		$1 == "config" { n++; name = val($3); if (name == "") name = "cfg" n; sec = name;
			print "CONFIG_SECTIONS=\"$CONFIG_SECTIONS " sec "\""; print "CONFIG_" sec "_TYPE=" q val($2) q; next }
		$1 == "option" && sec != "" { o = $2; $1 = ""; $2 = ""; v = val($0); if (v != "") print "CONFIG_" sec "_" o "=" q v q }
	' "$IPKG_INSTROOT/etc/config/$1" 2>/dev/null)
	eval "$_cl"
}

# config_get VAR SECTION OPTION [DEFAULT] or config_get SECTION OPTION
config_get() {
	if [ $# -ge 3 ]; then
		eval "$1=\${CONFIG_$2_$3:-\$4}"
	else
		eval "echo \"\${CONFIG_$1_$2}\""
	fi
}

config_foreach() {
	_cf_fn=$1
	_cf_type=$2
	for _cf_s in $CONFIG_SECTIONS; do
		_cf_t=
		eval "_cf_t=\$CONFIG_${_cf_s}_TYPE"
		[ -n "$_cf_type" ] && [ "$_cf_t" != "$_cf_type" ] && continue
		"$_cf_fn" "$_cf_s"
	done
}
