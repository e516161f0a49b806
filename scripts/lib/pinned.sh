# shellcheck shell=sh
# Pinned upstream sources: `git archive` tarballs NAME-COMMIT.tar.xz in
# $src_dir (../shared/openwrt-src beside the clone) where it exists, else
# the same commit cloned from upstream, as a user's machine gets them.
# Sourced by scripts/openwrt-stack.sh and scripts/goresponsiveness.sh.

# pinned_unpack NAME URL COMMIT DEST: the source tree of NAME at COMMIT in DEST
# (src_dir is the sourcing script's).
# shellcheck disable=SC2154
pinned_unpack() {
	if [ -d "$src_dir" ]; then
		mkdir -p "$4.x"
		tar -xJf "$src_dir/$1-$3.tar.xz" -C "$4.x"
		mv "$4.x"/* "$4"
		rmdir "$4.x"
	else
		echo "cloning $2 at $3 (no $src_dir)" >&2
		git clone -q "$2" "$4"
		git -C "$4" checkout -q "$3"
	fi
}
