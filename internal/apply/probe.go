package apply

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// slot names direction j of target i.
type slot struct{ i, j int }

// probe validates every direction's batch before any real device is touched.
// A direction whose ecn keyword tc refuses is re-planned without ECN.
func (o *Options) probe(ts []Target, rs []Result, slots []slot) {
	if o.Prober == nil || len(slots) == 0 {
		return
	}
	dir := func(s slot) *plan.Dir { return rs[s.i].Plan.Dirs[s.j] }
	res := func(s slot) *DirResult { return &rs[s.i].Dirs[s.j] }
	verdicts, err := o.Prober.Probe(batches(slots, dir))
	if err != nil {
		o.log("probe unavailable (%v); applying unprobed, a failed direction is rolled back", err)
		return
	}
	var retry []slot
	var alt []*plan.Dir
	var why []error
	for k, v := range verdicts {
		s := slots[k]
		if v == nil {
			continue
		}
		nd, ok, err := o.fallback(ts[s.i], dir(s), v)
		switch {
		case !ok:
			res(s).Err = v
			o.log("%s %s: %v", res(s).Device, res(s).Direction.Side(), v)
		case err != nil:
			res(s).Err = err
		default:
			retry, alt, why = append(retry, s), append(alt, nd), append(why, v)
		}
	}
	if len(retry) == 0 {
		return
	}
	vs, err := o.Prober.Probe(batches(retry, func(s slot) *plan.Dir { return alt[slices.Index(retry, s)] }))
	if err != nil {
		return
	}
	for n, s := range retry {
		if vs[n] != nil {
			res(s).Err = vs[n]
			o.log("%s %s: refused even as %s: %v", res(s).Device, res(s).Direction.Side(), alt[n].Tree[0].Kind, vs[n])
			continue
		}
		o.adopt(rs[s.i].Plan, s.j, res(s), alt[n], why[n])
	}
}

func batches(slots []slot, dir func(slot) *plan.Dir) [][][]string {
	out := make([][][]string, len(slots))
	for i, s := range slots {
		out[i] = dir(s).TC
	}
	return out
}

// fallback re-plans direction d that tc refused with err, where a
// narrower tree of the same backend exists: without ECN where tc refused
// the ecn keyword (stock tc without the NSS patch), plain cake where tc
// or the kernel refused cake_mq (before Linux 7.0 or iproute2 7.1). ok is
// false when neither applies.
func (o *Options) fallback(t Target, d *plan.Dir, err error) (nd *plan.Dir, ok bool, ferr error) {
	switch {
	case refusesECN(d, err):
		nd, ferr = o.withoutECN(t, d)
	case refused(err, "cake_mq") && d.Tree[0].Kind == "cake_mq":
		q := t.Queue
		q.UseMQ = false
		nd, ferr = o.replan(q, t.Facts, d)
	default:
		return nil, false, nil
	}
	return nd, true, ferr
}

// refused reports a refusal of a line that carries word.
func refused(err error, word string) bool {
	var argv []string
	var rej *tc.Rejection
	var be *tc.BatchError
	switch {
	case errors.As(err, &rej):
		argv = rej.Argv
	case errors.As(err, &be):
		_, argv = be.First()
	}
	return slices.Contains(argv, word)
}

// refusesECN reports a refusal of a line that carries the ecn keyword in a
// direction planned with ECN: stock tc without the NSS patch does that.
func refusesECN(d *plan.Dir, err error) bool { return d.ECN && refused(err, "ecn") }

// withoutECN re-plans t with ECN off for d's direction.
func (o *Options) withoutECN(t Target, d *plan.Dir) (*plan.Dir, error) {
	q := t.Queue
	field := "egress_ecn"
	if d.Direction == config.Download {
		q.IngressECN, field = false, "ingress_ecn"
	} else {
		q.EgressECN = false
	}
	nd, err := o.replan(q, t.Facts, d)
	if err == nil && nd.ECN {
		return nil, fmt.Errorf("%s: tc refuses the ecn keyword and the qdisc options force it; remove ecn from the %s options", field, d.Direction.Side())
	}
	return nd, err
}

// replan is d's direction of q's plan.
func (o *Options) replan(q config.Queue, f linkinfo.Facts, d *plan.Dir) (*plan.Dir, error) {
	p, err := o.fresh(q, f)
	if err != nil {
		return nil, err
	}
	for _, nd := range p.Dirs {
		if nd.Direction == d.Direction {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("%s %s: cannot re-plan it", d.Device, d.Direction.Side())
}

// adopt puts the re-planned direction nd in place of direction j, refused
// with err, and warns.
func (o *Options) adopt(p *plan.Plan, j int, dr *DirResult, nd *plan.Dir, err error) {
	old := p.Dirs[j]
	p.Dirs[j] = nd
	w := fmt.Sprintf("%s %s: tc refused the ecn keyword; shaping without ECN (a tc with the NSS patch keeps it)", nd.Device, nd.Direction.Side())
	if old.Tree[0].Kind == "cake_mq" && nd.Tree[0].Kind != "cake_mq" {
		dr.PlainCake = fmt.Sprintf("tc or the kernel refused cake_mq (%v)", firstLine(err))
		w = fmt.Sprintf("%s %s: %s; shaping with plain cake (cake_mq needs Linux 7.0 or OpenWrt 25.12's backport, and tc from iproute2 7.1)", nd.Device, nd.Direction.Side(), dr.PlainCake)
	}
	dr.Warnings = append(dr.Warnings, w)
	o.log("%s", w)
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
