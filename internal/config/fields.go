package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/bbproto"
)

// field ties one UCI option to its command-line flag and to the Queue field
// it sets, so the file and the flags parse values identically and every
// error can name both ways of fixing it.
type field struct {
	opt     string // UCI option name
	flag    string // command-line flag; "" when the option has none
	example string // a valid value, for error messages
	usage   string
	set     func(q *Queue, v string) error // parses v; the error says what is wrong with it
}

// fields lists every option sqmkit reads. script comes first so that the
// backend/diffserv it implies can be overridden by the options after it.
var fields = []field{
	{"script", "script", "piece_of_cake.qos", "sqm-scripts `SCRIPT` name; picks the backend like the UCI option",
		func(q *Queue, v string) error {
			if _, ok := scripts[v]; !ok {
				return fmt.Errorf("%q is not a known sqm-scripts script (known: %s)", v, strings.Join(slices.Sorted(maps.Keys(scripts)), ", "))
			}
			q.Script = v
			return nil
		}},
	{"enabled", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.Enabled })},
	{"interface", "interface", "eth0", "`DEVICE` to shape (without /etc/config/sqm: the queue to create)",
		func(q *Queue, v string) error { q.Interface = v; return nil }},
	{"download", "download", "95000", "ingress shaper rate in `KBIT`/s (0: do not shape)", kbit(func(q *Queue) *int { return &q.Download })},
	{"upload", "upload", "9500", "egress shaper rate in `KBIT`/s (0: do not shape)", kbit(func(q *Queue) *int { return &q.Upload })},
	{"qdisc", "", "cake", "", func(q *Queue, v string) error { q.Qdisc = v; return nil }},
	{"backend", "backend", "cake", "qdisc tree `NAME`: nss, cake or fq_codel (overrides script)",
		func(q *Queue, v string) error { q.Backend = Backend(strings.ToLower(v)); return nil }},
	{"linklayer", "linklayer", "ethernet", "link layer `TYPE`: none, ethernet or atm",
		func(q *Queue, v string) error { q.LinkLayer = LinkLayer(strings.ToLower(v)); return nil }},
	{"overhead", "overhead", "34", "per-packet overhead in `BYTES` (0: detect)", integer(-1<<31, func(q *Queue) *int { return &q.Overhead })},
	{"linklayer_advanced", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.LinkLayerAdvanced })},
	{"tcMTU", "", "2047", "", integer(0, func(q *Queue) *int { return &q.TcMTU })},
	{"tcTSIZE", "", "128", "", integer(0, func(q *Queue) *int { return &q.TcTSIZE })},
	{"tcMPU", "mpu", "64", "minimum packet unit in `BYTES`", integer(0, func(q *Queue) *int { return &q.TcMPU })},
	{"linklayer_adaptation_mechanism", "", "cake", "", func(q *Queue, v string) error { q.LinkLayerAdaptation = v; return nil }},
	{"qdisc_advanced", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.QdiscAdvanced })},
	{"squash_dscp", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.SquashDSCP })},
	{"squash_ingress", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.SquashIngress })},
	{"ingress_ecn", "ingress-ecn", "ECN", "`ECN` on the download: ECN or NOECN", ecn(func(q *Queue) *bool { return &q.IngressECN })},
	{"egress_ecn", "egress-ecn", "NOECN", "`ECN` on the upload: ECN or NOECN", ecn(func(q *Queue) *bool { return &q.EgressECN })},
	{"qdisc_really_really_advanced", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.QdiscReallyReallyAdvanced })},
	{"itarget", "itarget", "5ms", "ingress fq_codel `TARGET` (a duration or auto)", func(q *Queue, v string) error { q.ITarget = v; return nil }},
	{"etarget", "etarget", "5ms", "egress fq_codel `TARGET` (a duration or auto)", func(q *Queue, v string) error { q.ETarget = v; return nil }},
	{"ilimit", "ilimit", "1000", "ingress queue limit in `PACKETS` (0: compute)", integer(0, func(q *Queue) *int { return &q.ILimit })},
	{"elimit", "elimit", "1000", "egress queue limit in `PACKETS` (0: compute)", integer(0, func(q *Queue) *int { return &q.ELimit })},
	{"iqdisc_opts", "iqdisc-opts", "interval 50ms quantum 304", "ingress qdisc `OPTIONS` that replace computed ones",
		func(q *Queue, v string) error { q.IQdiscOpts = v; return nil }},
	{"eqdisc_opts", "eqdisc-opts", "interval 50ms quantum 304", "egress qdisc `OPTIONS` that replace computed ones",
		func(q *Queue, v string) error { q.EQdiscOpts = v; return nil }},
	{"debug_logging", "", "1", "", sqmBool(func(q *Queue) *bool { return &q.DebugLogging })},
	{"verbosity", "", "5", "", integer(0, func(q *Queue) *int { return &q.Verbosity })},
	{"diffserv", "diffserv", "diffserv4", "cake diffserv `MODE`: besteffort, diffserv3, diffserv4, diffserv8, precedence",
		func(q *Queue, v string) error { q.Diffserv = v; return nil }},
	{"rtt", "rtt", "internet", "cake `RTT` preset or duration", func(q *Queue, v string) error { q.RTT = v; return nil }},
	{"autorate", "", "1", "", boolean(func(q *Queue) *bool { return &q.Autorate })},
	{"autorate_min_download", "", "10000", "", kbit(func(q *Queue) *int { return &q.AutorateMin.Download })},
	{"autorate_max_download", "", "80000", "", kbit(func(q *Queue) *int { return &q.AutorateMax.Download })},
	{"autorate_min_upload", "", "2000", "", kbit(func(q *Queue) *int { return &q.AutorateMin.Upload })},
	{"autorate_max_upload", "", "20000", "", kbit(func(q *Queue) *int { return &q.AutorateMax.Upload })},
	{"autorate_server", "", "192.0.2.1:5201", "", func(q *Queue, v string) error {
		if v != "" {
			if err := bbproto.CheckServer(v); err != nil {
				return err
			}
		}
		q.AutorateServer = v
		return nil
	}},
	{"test_server", "", "https://mensura.cdn-apple.com/api/v1/gm/config", "", func(q *Queue, v string) error {
		if v != "" {
			check := bbproto.CheckServer
			if strings.Contains(v, "://") {
				check = bbproto.CheckServerURL
			}
			if err := check(v); err != nil {
				return err
			}
		}
		q.TestServer = v
		return nil
	}},
	{"autorate_reflectors", "", "1.1.1.1 9.9.9.9", "", func(q *Queue, v string) error { q.AutorateReflectors = v; return nil }},
	{"watch", "", "0", "", func(q *Queue, v string) error {
		on := true
		if err := boolean(func(*Queue) *bool { return &on })(q, v); err != nil {
			return err
		}
		q.WatchOff = !on
		return nil
	}},
	{"watch_test", "", "weekly", "", func(q *Queue, v string) error {
		switch v {
		case "", "off", "daily", "weekly":
			q.WatchTest = strings.TrimPrefix(v, "off")
			return nil
		}
		return fmt.Errorf("%q is not a schedule (use daily, weekly or off)", v)
	}},
	{"use_mq", "use-mq", "1", "cake backend: multi-queue cake (cake_mq) on a device with several queues, `1|0`",
		boolean(func(q *Queue) *bool { return &q.UseMQ })},
	{"ifb", "ifb", "ifb4eth0", "`IFB` device for the download (default derived from the interface)",
		func(q *Queue, v string) error { q.IFB = v; return nil }},
}

func fieldFor(opt string) *field {
	for i := range fields {
		if fields[i].opt == opt {
			return &fields[i]
		}
	}
	return nil
}

func kbit(p func(*Queue) *int) func(*Queue, string) error {
	return func(q *Queue, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a number of kbit/s", v)
		}
		if n < 0 {
			return fmt.Errorf("%d kbit/s is negative; 0 means do not shape", n)
		}
		*p(q) = n
		return nil
	}
}

func integer(least int, p func(*Queue) *int) func(*Queue, string) error {
	return func(q *Queue, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < least {
			return fmt.Errorf("%d is negative", n)
		}
		*p(q) = n
		return nil
	}
}

// boolean accepts the spellings UCI users write (as OpenWrt's config_get_bool).
func boolean(p func(*Queue) *bool) func(*Queue, string) error {
	return func(q *Queue, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "yes", "on", "true", "enabled":
			*p(q) = true
		case "0", "no", "off", "false", "disabled":
			*p(q) = false
		default:
			return fmt.Errorf("%q is not a boolean (use 1 or 0)", v)
		}
		return nil
	}
}

// sqmBool reads sqm-scripts' own switches as its scripts test them
// (`[ "$x" -eq 1 ]`): on for a whole number equal to 1, off otherwise;
// "yes" or "on", which libuci's booleans take, is off there, so it is off
// here too, with a note that says so (TestEnabledAsSQMScripts).
func sqmBool(p func(*Queue) *bool) func(*Queue, string) error {
	return func(q *Queue, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		*p(q) = err == nil && n == 1
		if err != nil {
			q.Notes = append(q.Notes, fmt.Sprintf("%q reads as off: sqm-scripts turns a switch on only with '1' (write '1' or '0')", v))
		}
		return nil
	}
}

func ecn(p func(*Queue) *bool) func(*Queue, string) error {
	return func(q *Queue, v string) error {
		switch strings.ToUpper(strings.TrimSpace(v)) {
		case "ECN":
			*p(q) = true
		case "NOECN":
			*p(q) = false
		default:
			return fmt.Errorf("%q is not ECN or NOECN", v)
		}
		return nil
	}
}
