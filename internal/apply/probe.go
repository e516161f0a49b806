package apply

import (
	"errors"
	"fmt"
	"slices"

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
	for k, v := range verdicts {
		s := slots[k]
		switch {
		case v == nil:
		case refusesECN(dir(s), v):
			nd, err := o.withoutECN(ts[s.i], dir(s))
			if err != nil {
				res(s).Err = err
				continue
			}
			retry, alt = append(retry, s), append(alt, nd)
		default:
			res(s).Err = v
			o.log("%s %s: %v", res(s).Device, res(s).Direction, v)
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
			o.log("%s %s: refused even without ecn: %v", res(s).Device, res(s).Direction, vs[n])
			continue
		}
		o.adopt(rs[s.i].Plan, s.j, res(s), alt[n])
	}
}

func batches(slots []slot, dir func(slot) *plan.Dir) [][][]string {
	out := make([][][]string, len(slots))
	for i, s := range slots {
		out[i] = dir(s).TC
	}
	return out
}

// refusesECN reports a refusal of a line that carries the ecn keyword in a
// direction planned with ECN: stock tc without the NSS patch does that.
func refusesECN(d *plan.Dir, err error) bool {
	if !d.ECN {
		return false
	}
	var argv []string
	var rej *tc.Rejection
	var be *tc.BatchError
	switch {
	case errors.As(err, &rej):
		argv = rej.Argv
	case errors.As(err, &be):
		_, argv = be.First()
	}
	return slices.Contains(argv, "ecn")
}

// withoutECN re-plans t with ECN off for d's direction.
func (o *Options) withoutECN(t Target, d *plan.Dir) (*plan.Dir, error) {
	q := t.Queue
	field := "egress_ecn"
	if d.Direction == plan.Ingress {
		q.IngressECN, field = false, "ingress_ecn"
	} else {
		q.EgressECN = false
	}
	p, err := o.build(q, t.Facts)
	if err != nil {
		return nil, err
	}
	for _, nd := range p.Dirs {
		if nd.Direction != d.Direction {
			continue
		}
		if nd.ECN {
			return nil, fmt.Errorf("%s: tc refuses the ecn keyword and the qdisc options force it; remove ecn from the %s options", field, d.Direction)
		}
		return nd, nil
	}
	return nil, fmt.Errorf("%s %s: cannot re-plan without ECN", d.Device, d.Direction)
}

// adopt puts the ECN-less direction nd in place of direction j and warns.
func (o *Options) adopt(p *plan.Plan, j int, dr *DirResult, nd *plan.Dir) {
	p.Dirs[j] = nd
	w := fmt.Sprintf("%s %s: tc refused the ecn keyword; shaping without ECN (a tc with the NSS patch keeps it)", nd.Device, nd.Direction)
	dr.Warnings = append(dr.Warnings, w)
	o.log("%s", w)
}
