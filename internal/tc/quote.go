package tc

import (
	"fmt"
	"strings"
)

// Render turns argv lines into batch input. iproute2 splits batch lines on
// blanks and keeps a word whole when it starts with ' or " (up to the same
// quote, no escapes), and it cuts every line at '#', even inside quotes. So a
// word is quoted only when it must be, and words that no quoting can carry
// are refused rather than silently mangled.
func Render(lines [][]string) (string, error) {
	var b strings.Builder
	for _, argv := range lines {
		for i, w := range argv {
			q, err := quote(w)
			if err != nil {
				return "", fmt.Errorf("batch line %q: %w", strings.Join(argv, " "), err)
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(q)
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

func quote(w string) (string, error) {
	if strings.ContainsAny(w, "#\n\r") {
		return "", fmt.Errorf("word %q: '#' and line breaks cannot be passed in a batch", w)
	}
	// A trailing backslash would join the next line; quoting hides it.
	if w != "" && !strings.ContainsAny(w, " \t'\"") && !strings.HasSuffix(w, `\`) {
		return w, nil
	}
	switch {
	case !strings.Contains(w, `"`):
		return `"` + w + `"`, nil
	case !strings.Contains(w, `'`):
		return `'` + w + `'`, nil
	}
	return "", fmt.Errorf("word %q holds both quote characters, which a batch cannot carry", w)
}

// Split parses one batch line the way iproute2 does: '#' starts a comment,
// a word starting with a quote runs to the matching quote.
func Split(line string) ([]string, error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	var argv []string
	for {
		line = strings.TrimLeft(line, " \t\r\n")
		if line == "" {
			return argv, nil
		}
		if c := line[0]; c == '"' || c == '\'' {
			end := strings.IndexByte(line[1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quoted string in %q", line)
			}
			argv = append(argv, line[1:1+end])
			line = line[2+end:]
			continue
		}
		end := strings.IndexAny(line, " \t\r\n")
		if end < 0 {
			end = len(line)
		}
		argv = append(argv, line[:end])
		line = line[end:]
	}
}
