package vm

import (
	"slices"
	"strings"
	"testing"
)

func TestIsKernelLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		want bool
	}{
		{"[    4.451234] virtio_net virtio0: ...", true},
		{"[12345.000001] x", true},
		{"[SUM]   0.00-10.00  sec  45.2 MBytes  37.9 Mbits/sec", false},
		{"[  5]   0.00-1.00   sec  4.50 MBytes", false},
		{"lab: cable/cake: PASS", false},
	} {
		if got := IsKernelLine(tt.line); got != tt.want {
			t.Errorf("IsKernelLine(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestArgs(t *testing.T) {
	c := Config{Kernel: "/boot/k", Initrd: "/c/i.gz", Results: "/r/run", Cmd: []string{"/r/run/bin/lab", "guest", "/r/run/plan.json"}}
	args, err := Args(c)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(args, "-append")
	if i < 0 || !strings.Contains(args[i+1], "labresults=/r/run labcmd=/r/run/bin/lab:guest:/r/run/plan.json") {
		t.Errorf("-append carries no command: %q", args)
	}
	for _, want := range []string{"tcg,thread=multi", "local,path=/r/run,mount_tag=results,security_model=none,multidevs=remap"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q", want)
		}
	}
	if strings.Contains(args[i+1], "labmods") || strings.Contains(args[i+1], "labpath") {
		t.Errorf("the host's kernel needs no module directory or PATH: %q", args[i+1])
	}
	c.Modules, c.Path = "/c/kernels/7/lib/modules/7.2.13+deb14-amd64", "/c/iproute2/bin"
	if args, _ = Args(c); !strings.HasSuffix(args[i+1], " labmods=/c/kernels/7/lib/modules/7.2.13+deb14-amd64 labpath=/c/iproute2/bin") {
		t.Errorf("a fetched kernel's modules and tc are not passed on: %q", args[i+1])
	}
	for _, bad := range []Config{
		{Results: "/r/with space", Cmd: []string{"x"}},
		{Results: "/r", Cmd: []string{"a:b"}},
	} {
		if _, err := Args(bad); err == nil {
			t.Errorf("%+v: no error for an argument the kernel command line cannot carry", bad)
		}
	}
}

// TestCleanLine: SeaBIOS' and the kernel's terminal control (a reset, a
// screen clear, line wrap off) never reach the user's terminal.
func TestCleanLine(t *testing.T) {
	for in, want := range map[string]string{
		"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2)": "SeaBIOS (version 1.16.2)",
		"lab: cable/cake: PASS grade A+":                      "lab: cable/cake: PASS grade A+",
		"\x1b[1;1Hboot\x07":                                   "boot",
		"\x1b(Bplain":                                         "plain",
	} {
		if got := CleanLine(in); got != want {
			t.Errorf("CleanLine(%q) = %q, want %q", in, got, want)
		}
	}
}
