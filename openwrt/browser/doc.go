// Package browser tests luci-app-sqmkit's pages in a real browser
// (headless Chromium from Debian's packages) against the real plugin,
// `sqmkit rpcd`, on a queue shaped in a test namespace. It is a module of
// its own so that the browser driver's Go version stays out of sqmkit's
// go.mod, which OpenWrt's oldest supported Go must build (make test runs
// it: `cd openwrt/browser && go test ./...`).
package browser
