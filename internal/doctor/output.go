package doctor

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the report for people: a header saying what was judged
// and how, then one block per finding, failures first.
func (r *Diagnosis) WriteText(w io.Writer) error {
	var b strings.Builder
	devs := strings.Join(r.Devices, ", ")
	if devs == "" {
		devs = "no shaped device found"
	}
	fmt.Fprintf(&b, "sqmkit doctor: %s\n%s\n\n", devs, r.Note)
	counts := map[Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
		fmt.Fprintf(&b, "%-4s  %s  %s\n", strings.ToUpper(f.Severity.String()), f.ID, f.Subject)
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "      %s\n", e)
		}
		if f.Fix != "" {
			fmt.Fprintf(&b, "      fix: %s\n", f.Fix)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d fail, %d warn, %d ok\n", counts[Fail], counts[Warn], counts[OK])
	_, err := io.WriteString(w, b.String())
	return err
}
