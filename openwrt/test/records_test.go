package openwrttest

import (
	"strings"
	"testing"
)

// sqmkit's own service acts on what it applied, not on the config as it is
// now: a moved queue leaves nothing on its old interface after a reload, a
// deleted section is removed by the reload and by the service's stop.
func TestOwnServiceFollowsWhatItApplied(t *testing.T) {
	r := newRouter(t)
	r.addLink("wanp")
	r.initd("enable")
	r.queue(true, "sqmkit-fq_codel.qos", 20000, 10000)
	if code, out := r.initd("start"); code != 0 || !r.shaped("wan") || !r.link("ifb4wan") {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	r.config(queue{section: "wan", iface: "wanp", script: "sqmkit-fq_codel.qos", enabled: true, download: 20000, upload: 10000})
	if code, out := r.initd("reload"); code != 0 || !r.shaped("wanp") || !r.ingress("wanp") {
		t.Fatalf("reload of the moved queue: exit %d\n%s\n%s", code, out, r.qdiscs())
	}
	r.clean(t, "wan", "ifb4wan")

	// the section deleted: the reload removes what it applied
	r.write("/etc/config/sqm", "")
	if code, out := r.initd("reload"); code != 0 {
		t.Fatalf("reload without sections: exit %d\n%s", code, out)
	}
	r.clean(t, "wanp", "ifb4wanp")

	// started, then the section deleted: the service's stop removes it
	r.queue(true, "sqmkit-fq_codel.qos", 20000, 10000)
	r.initd("start")
	r.write("/etc/config/sqm", "")
	code, out := r.initd("stop")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("stop after the section was deleted: exit %d\n%s", code, out)
	}
	r.clean(t, "wan", "ifb4wan")

	// the backend changed on the same device: the old IFB's tree goes (nss
	// keeps its IFB device), the download moves to the new IFB
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	r.initd("start")
	r.queue(true, "sqmkit-fq_codel.qos", 20000, 10000)
	if code, out := r.initd("reload"); code != 0 {
		t.Fatalf("reload with another backend: exit %d\n%s", code, out)
	}
	filters := r.tc("filter", "show", "dev", "wan", "ingress")
	if strings.Contains(r.tc("qdisc", "show", "dev", "ifb@wan"), " 1: ") || !r.shaped("ifb4wan") ||
		strings.Contains(filters, "ifb@wan") || !strings.Contains(filters, "ifb4wan") {
		t.Errorf("after the backend changed:\n%s\n%s", r.qdiscs(), filters)
	}
}

// An ifb option naming a device that is not an IFB is refused at start, and
// a stop, whether sqmkit started or not, never deletes such a device nor
// touches its qdiscs: an `ifb 'br-lan'` on a disabled section once
// deleted the LAN bridge.
func TestForeignIFB(t *testing.T) {
	r := newRouter(t)
	r.ip("link", "add", "lan0", "type", "bridge")
	r.ip("link", "set", "lan0", "up")
	r.addLink("lan1") // a veth LAN port
	r.tc("qdisc", "add", "dev", "lan1", "root", "handle", "1:", "htb")
	r.initd("enable")
	disabled := func(ifb string) queue {
		return queue{section: "old", iface: "wan", script: "sqmkit-fq_codel.qos", download: 20000, upload: 10000, extra: "\toption ifb '" + ifb + "'\n"}
	}
	for _, ifb := range []string{"lan0", "lan1", "wan"} {
		r.config(disabled(ifb))
		for _, act := range []string{"stop", "reload"} {
			if code, out := r.initd(act); code != 0 {
				t.Errorf("ifb %s, %s: exit %d\n%s", ifb, act, code, out)
			}
		}
		if code, out := r.sqmkit("stop", "old"); code != 0 {
			t.Errorf("ifb %s: sqmkit stop old: exit %d\n%s", ifb, code, out)
		}
	}
	if !r.link("lan0") || !r.link("lan1") || !r.link("wan") || !r.shaped("lan1") {
		t.Fatalf("a stop deleted or emptied a device it did not create:\n%s", r.qdiscs())
	}

	// start refuses them, saying which option and why, and touches nothing
	for _, ifb := range []string{"lan0", "lan1", "wan"} {
		q := disabled(ifb)
		q.enabled = true
		r.config(q)
		code, out := r.sqmkit("start", "old")
		if code == 0 || !strings.Contains(out, "ifb") || !strings.Contains(out, "fix:") {
			t.Errorf("start with ifb %s: exit %d\n%s", ifb, code, out)
		}
		if r.shaped("wan") || r.ingress("wan") {
			t.Errorf("start with ifb %s touched wan:\n%s", ifb, r.qdiscs())
		}
	}
	if !r.shaped("lan1") {
		t.Errorf("lan1's own root qdisc is gone:\n%s", r.qdiscs())
	}

	// an IFB sqmkit did not create is used, and emptied by a stop, but kept
	r.ip("link", "add", "ifb0", "type", "ifb")
	q := disabled("ifb0")
	q.enabled = true
	r.config(q)
	if code, out := r.sqmkit("start", "old"); code != 0 || !r.shaped("ifb0") {
		t.Fatalf("start with an existing IFB: exit %d\n%s", code, out)
	}
	if code, out := r.initd("stop"); code != 0 || !r.link("ifb0") || r.shaped("ifb0") || r.shaped("wan") {
		t.Errorf("stop: exit %d, ifb0 there %v\n%s\n%s", code, r.link("ifb0"), out, r.qdiscs())
	}
}
