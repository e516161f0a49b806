package tc

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Output runs `tc args...` once and returns what it printed on stdout.
// Read uses it for `show` commands, which batch mode cannot attribute to
// devices in text form.
func (r *Runner) Output(args ...string) ([]byte, error) {
	if r.Debug != nil {
		r.Debug("exec tc " + strings.Join(args, " "))
	}
	var stderr bytes.Buffer
	cmd := exec.Command("tc", args...)
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.procs.Add(1)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tc %s: %w", strings.Join(args, " "), err)
	}
	b, rerr := sizelimit.Read(out, "tc "+strings.Join(args, " "), sizelimit.TCOutput, "tc output")
	if rerr != nil {
		cmd.Process.Kill()
	}
	if err := cmd.Wait(); rerr == nil && err != nil {
		return nil, fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return b, rerr
}

// Read returns the live tree as one tcstats.Snapshot: the qdiscs of every
// device (one `tc -s -d qdisc show`, which names each device), and the
// classes, root filters and ingress filters of devs and of the devices their
// ingress filters redirect to. With no devs, every device with a configured
// root or an ingress qdisc is read in full. Text output is read, not JSON:
// it is what every tc prints, the NSS-patched one included, and the only
// form that carries classes on iproute2 6.1. Classes and root filters are
// read only under a classful qdisc, ingress filters only under an ingress
// qdisc, so an nss or cake queue costs two processes in all.
func (r *Runner) Read(devs ...string) (*tcstats.Snapshot, error) {
	s := &tcstats.Snapshot{Complete: true}
	out, err := r.Output("-s", "-d", "qdisc", "show")
	if err != nil {
		return nil, err
	}
	if s.Records, err = tcstats.Parse(out); err != nil && !errors.Is(err, tcstats.ErrEmpty) {
		return nil, fmt.Errorf("tc -s -d qdisc show: %w", err)
	}
	want := slices.Clone(devs)
	if len(want) == 0 {
		want = s.Configured()
	}
	for i := 0; i < len(want); i++ {
		dev := want[i]
		var reads [][]string
		if s.HasClassful(dev) {
			reads = append(reads, []string{"-s", "-d", "class", "show", "dev", dev}, []string{"-s", "filter", "show", "dev", dev})
		}
		if s.IngressQdisc(dev) != nil {
			reads = append(reads, []string{"-s", "filter", "show", "dev", dev, "parent", "ffff:"})
		}
		for _, args := range reads {
			recs, err := r.records(args)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				// `show dev X` omits the device, and a filter listed
				// under `parent ffff:` does not repeat its parent.
				rec.Dev = dev
				if rec.Type == "filter" && slices.Contains(args, "ffff:") {
					rec.Parent = tcstats.Ingress
				}
				s.Records = append(s.Records, rec)
			}
		}
		for _, to := range s.Redirects(dev) {
			if !slices.Contains(want, to) {
				want = append(want, to)
			}
		}
	}
	return s, nil
}

func (r *Runner) records(args []string) ([]tcstats.Record, error) {
	out, err := r.Output(args...)
	if err != nil {
		return nil, err
	}
	recs, err := tcstats.Parse(out)
	if errors.Is(err, tcstats.ErrEmpty) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tc %s: %w", strings.Join(args, " "), err)
	}
	return recs, nil
}
