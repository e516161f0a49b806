package plan

import (
	"bufio"
	"io"
	"strings"
)

// Write renders p as `sqmkit plan` prints it: `#` derivation lines, the
// teardown a start runs first, then per direction its notes, the ip lines
// and the tc lines. Each command line is the program name followed by
// exactly the line `ip -batch` / `tc -batch` gets, so the output can be
// pasted into a shell.
func (p *Plan) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	comment := func(s string) {
		bw.WriteString("# " + strings.ReplaceAll(s, "\n", " ") + "\n")
	}
	commands := func(prog string, lines [][]string) {
		for _, l := range lines {
			bw.WriteString(prog + " " + strings.Join(l, " ") + "\n")
		}
	}
	for _, n := range p.Notes {
		comment(n)
	}
	comment("teardown: start runs these first (tc -force -batch), errors ignored")
	for _, d := range p.Dirs {
		commands("tc", d.Teardown)
	}
	if len(p.Clear) > 0 {
		comment("and these for the unshaped direction, in case an earlier start shaped it")
		commands("tc", p.Clear)
	}
	for _, d := range p.Dirs {
		for _, n := range d.Notes {
			comment(n)
		}
		commands("ip", d.Setup)
		commands("tc", d.TC)
	}
	return bw.Flush()
}
