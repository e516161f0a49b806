# Stand-in for OpenWrt's /lib/functions/service.sh, which rc.common
# sources; sqmkit's init script uses none of its helpers.
