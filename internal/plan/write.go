package plan

import (
	"bufio"
	"io"
	"strings"
)

// Write renders p as `sqmkit plan` prints it: `#` derivation lines, the
// teardown a start runs first, then per direction its notes, the ip lines
// and the tc lines. Each command line is the program name followed by
// the words `ip -batch` / `tc -batch` get, quoted for a POSIX shell where
// needed, so the output can be pasted into one: a device named $(reboot)
// is printed '$(reboot)'.
func (p *Plan) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	comment := func(s string) {
		bw.WriteString("# " + strings.ReplaceAll(s, "\n", " ") + "\n")
	}
	commands := func(prog string, lines [][]string) {
		for _, l := range lines {
			bw.WriteString(prog)
			for _, w := range l {
				bw.WriteString(" " + shellWord(w))
			}
			bw.WriteString("\n")
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

// shellWord quotes w for a POSIX shell unless it is made only of characters
// no shell treats specially.
func shellWord(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
