package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// pppdKernelName is the subcommand with which the lab binary acts as the
// pppd that pppoe-server starts (its -q option, through a two-line script). Debian builds pppoe-server
// without kernel mode, so every session frame would cross a pty to a
// user-space relay: on the emulated CPU that relay, not the link, becomes
// the bottleneck. pppoe-server still does the discovery; the wrapper hands
// the session it negotiated to the kernel through pppd's rp-pppoe plugin.
const pppdKernelName = "pppd-kernel-mode"

// kernelModeArgs turns pppoe-server's user-mode pppd arguments
// (`pty "pppoe -n -I IF -e SESS:MAC -S ”" ...`) into kernel-mode ones
// (`plugin rp-pppoe.so rp_pppoe_sess SESS:MAC nic-IF ...`).
// The router always gets the same address: pppoe-server hands out its pool
// in turn, and a session that re-dials (the hotplug scenario's reconnect)
// before the last one is freed would get the modem's own address.
func kernelModeArgs(args []string, plugin string) ([]string, error) {
	var out []string
	found := false
	for i := 0; i < len(args); i++ {
		if local, _, ok := strings.Cut(args[i], ":"); ok && local == modemIP {
			out = append(out, modemIP+":"+routerIP)
			continue
		}
		if args[i] != "pty" || i+1 >= len(args) {
			out = append(out, args[i])
			continue
		}
		f := strings.Fields(args[i+1])
		var ifname, sess string
		for j := 0; j+1 < len(f); j++ {
			switch f[j] {
			case "-I":
				ifname = f[j+1]
			case "-e":
				sess = f[j+1]
			}
		}
		if ifname == "" || sess == "" {
			return nil, fmt.Errorf("pty command %q lacks -I or -e", args[i+1])
		}
		out = append(out, "plugin", plugin, "rp_pppoe_sess", sess, "nic-"+ifname)
		found = true
		i++
	}
	if !found {
		return nil, fmt.Errorf("no pty option in %q", args)
	}
	return out, nil
}

// runPPPDWrapper is `sqmkit-lab pppd-kernel-mode LOG PPPD-ARGS...`.
func runPPPDWrapper(logPath string, pppdArgs []string) {
	// pppoe-server gives its pppd no stderr worth having.
	if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		os.Stderr = f
		syscall.Dup2(int(f.Fd()), 2)
	}
	plugin, err := pppoePlugin()
	if err == nil {
		var args []string
		if args, err = kernelModeArgs(pppdArgs, plugin); err == nil {
			fmt.Fprintf(os.Stderr, "%s: pppd %s\n", pppdKernelName, strings.Join(args, " "))
			err = syscall.Exec("/usr/sbin/pppd", append([]string{"pppd"}, args...), os.Environ())
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", pppdKernelName, err)
	os.Exit(1)
}
