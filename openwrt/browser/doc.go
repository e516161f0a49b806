// Package browser tests luci-app-sqmkit's pages in a real browser
// (headless Chromium from Debian's packages) on OpenWrt's real web stack:
// uhttpd, rpcd with its ACLs and logins, ubusd, LuCI's luci-base and the
// bootstrap theme, all built from pinned sources and booted under procd
// (openwrt/stack), with sqmkit installed by `sqmkit install` and its queue
// run by sqm-scripts. It is a module of its own so that the browser
// driver's Go version stays out of sqmkit's go.mod, which OpenWrt's oldest
// supported Go must build (make test runs it: `cd openwrt/browser && go
// test ./...`).
package browser
