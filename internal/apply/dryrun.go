package apply

import (
	"fmt"
	"io"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// dryStart prints the batches a start would run, as runnable shell.
func (o *Options) dryStart(p *plan.Plan, r *Result) {
	down, _ := o.teardown(p, r, make([]work, len(p.Dirs)), true)
	fmt.Fprintf(o.DryRun, "# %s: start %s (%s)\n", p.Section, p.Device, p.Backend)
	writeBatch(o.DryRun, "tc -force", down)
	for _, d := range p.Dirs {
		if d.Direction == config.Download && !o.Kernel.Link(p.IFB).Up {
			writeBatch(o.DryRun, "ip", d.Setup)
		}
		writeBatch(o.DryRun, "tc", d.TC)
	}
}

// writeBatch prints lines as a here-document for prog's batch mode; the
// quoted delimiter keeps the shell from expanding anything inside.
func writeBatch(w io.Writer, prog string, lines [][]string) {
	text, err := tc.Render(lines)
	if err != nil {
		fmt.Fprintf(w, "# cannot render batch: %v\n", err)
		return
	}
	fmt.Fprintf(w, "%s -batch - <<'EOF'\n%sEOF\n", prog, text)
}
