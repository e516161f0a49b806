# shellcheck shell=sh
# apt on private state under $apt_dir (set by the caller): Debian's trixie
# and unstable suites, without touching the host's sources, lists or
# installed packages. Sourced by scripts/kernels.sh and
# scripts/openwrt-stack.sh.
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# apt TOOL ARGS: apt-get or apt-cache on the private state.
apt() {
	tool=$1
	shift
	"$tool" -o Dir::Etc::sourcelist="$apt_dir/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
		-o Dir::State::status="$apt_dir/status" -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}

# apt_update: the suites' package lists, refreshed at most twice a day.
apt_update() {
	[ -f "$apt_dir/updated" ] && [ -n "$(find "$apt_dir/updated" -mmin -720)" ] && return 0
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	: >"$apt_dir/status"
	cat >"$apt_dir/sources.list" <<SRC
deb [signed-by=$keyring] $mirror trixie main
deb [signed-by=$keyring] $mirror unstable main
SRC
	apt apt-get -qq update
	touch "$apt_dir/updated"
}
