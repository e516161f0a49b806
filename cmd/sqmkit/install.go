package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/openwrt"
	"github.com/sqmkit/sqmkit/internal/tc"
)

func init() {
	register(command{name: "install", summary: "install this binary on an OpenWrt router with its service, hotplug handler and LuCI/sqm-scripts scripts (no buildroot needed)", run: runInstall})
	register(command{name: "uninstall", summary: "stop sqmkit's shaping and remove what sqmkit install put on the router (/etc/config/sqm stays)", run: runUninstall})
}

func runInstall(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("install", "")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "the OpenWrt system's root `DIR` (another one: a firmware image being assembled)")
	noDeps := fs.Bool("no-deps", false, "do not install missing packages (tc, ip, kmod-ifb, kmod-sched-core, kmod-sched-cake) with opkg or apk")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	self, err := os.Executable()
	if err == nil {
		err = openwrt.Install(*root, openwrt.Options{Self: self, Deps: !*noDeps, Out: stdout})
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit install: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "done: set the rates in /etc/config/sqm (or on LuCI's SQM page with a sqmkit-*.qos script), then run /etc/init.d/sqmkit reload; remove with: sqmkit uninstall")
	return 0
}

func runUninstall(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("uninstall", "")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "the OpenWrt system's root `DIR`")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	o := openwrt.Options{Out: stdout}
	openwrt.StopServices(*root, o)
	// whatever sqmkit applied and the services did not stop
	opts := systemOptions(*root, tc.DefaultCacheDir, 30*time.Second, false, stderr)
	opts.Uninstall = true // the nss IFBs it made go too
	recs, err := opts.Records.All()
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit uninstall: %v (those devices are left as they are)\n", err)
	}
	if printResults(stdout, apply.StopRecords(recs, opts)) != 0 {
		fmt.Fprintln(stderr, "sqmkit uninstall: a shaper could not be removed (see above); nothing was uninstalled")
		return 1
	}
	if err := openwrt.Uninstall(*root, o); err != nil {
		fmt.Fprintf(stderr, "sqmkit uninstall: %v\n", err)
		return 1
	}
	if qs, err := config.Load(*root, ""); err == nil {
		var left []string
		for _, q := range qs {
			if strings.HasPrefix(q.Script, "sqmkit-") {
				left = append(left, q.Section)
			}
		}
		if len(left) > 0 {
			fmt.Fprintf(stdout, "note: queue sections %s of /etc/config/sqm still name a sqmkit script, which is gone: pick another script (LuCI's SQM page) or disable them\n", strings.Join(left, ", "))
		}
	}
	return 0
}
