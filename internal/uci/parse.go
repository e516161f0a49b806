package uci

import (
	"bytes"
	"fmt"
	"strings"
)

// Parse reads a UCI file. name is used in error messages and should be the
// path the user knows (e.g. /etc/config/sqm).
//
// Syntax, as libuci reads it: statements are `package NAME`,
// `config TYPE [NAME]`, `option NAME [VALUE]` and `list NAME VALUE` (or their
// first letters), one per line or separated by ';'. An argument is a run of
// unquoted, 'single quoted' and "double quoted" parts with no blank between
// them, so 'it'\”s' is "it's". A backslash takes the next character
// literally outside single quotes; at the end of a line it joins the next
// line. Quoted parts may span lines. '#' outside quotes starts a comment.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{file: &File{Name: name}, data: data, line: 1}
	// libuci reads C strings, so a NUL silently cuts a line short; refuse it.
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, p.errorf(1+bytes.Count(data[:i], []byte("\n")), "remove the NUL byte; UCI files are text", "NUL byte in file")
	}
	if err := p.run(); err != nil {
		return nil, err
	}
	for _, s := range p.file.Sections {
		s.byName = nil
	}
	return p.file, nil
}

type parser struct {
	file    *File
	data    []byte
	pos     int
	line    int
	section *Section
	// named records the sections that have names, for merging repeats.
	named map[string]*Section
}

func (p *parser) errorf(line int, fix, format string, args ...any) error {
	return &Error{File: p.file.Name, Line: line, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

func (p *parser) peek(off int) byte {
	if p.pos+off < len(p.data) {
		return p.data[p.pos+off]
	}
	return 0
}

func (p *parser) eof() bool { return p.pos >= len(p.data) }

// continuation consumes a backslash-newline (or backslash-CRLF, or a
// backslash at the end of the file) at pos and reports whether there was one.
func (p *parser) continuation() bool {
	if p.peek(0) != '\\' {
		return false
	}
	switch {
	case p.pos+1 >= len(p.data):
		p.pos++
	case p.peek(1) == '\n':
		p.pos += 2
		p.line++
	case p.peek(1) == '\r' && p.peek(2) == '\n':
		p.pos += 3
		p.line++
	default:
		return false
	}
	return true
}

func (p *parser) skipBlanks() {
	for !p.eof() {
		if isBlank(p.data[p.pos]) {
			p.pos++
		} else if !p.continuation() {
			return
		}
	}
}

func (p *parser) skipComment() {
	for !p.eof() && p.data[p.pos] != '\n' {
		p.pos++
	}
}

func (p *parser) run() error {
	for !p.eof() {
		p.skipBlanks()
		if p.eof() {
			break
		}
		switch p.data[p.pos] {
		case '\n':
			p.pos++
			p.line++
			continue
		case ';':
			p.pos++
			continue
		case '#':
			p.skipComment()
			continue
		}
		if err := p.statement(); err != nil {
			return err
		}
	}
	return nil
}

// word reads the statement keyword: libuci splits it off at blanks only.
func (p *parser) word() string {
	start := p.pos
	for !p.eof() {
		c := p.data[p.pos]
		if isBlank(c) || c == '\n' || c == ';' || c == '#' {
			break
		}
		p.pos++
	}
	return string(p.data[start:p.pos])
}

func (p *parser) statement() error {
	line := p.line
	switch w := p.word(); w {
	case "package", "p":
		return p.pkg(line)
	case "config", "c":
		return p.config(line)
	case "option", "o":
		return p.option(line, false)
	case "list", "l":
		return p.option(line, true)
	default:
		return p.errorf(line, "statements are package, config, option or list; comments start with #",
			"unknown statement %q", clip(w))
	}
}

func (p *parser) pkg(line int) error {
	name, ok, err := p.arg()
	if err != nil {
		return err
	}
	if !ok {
		return p.errorf(line, "write package NAME, or drop the line", "package without a name")
	}
	if !validName(name, true) {
		return p.errorf(line, "use letters, digits, '_' and '-'", "invalid package name %q", clip(name))
	}
	if p.file.Package != "" && p.file.Package != name {
		return p.errorf(line, "put each package in its own file", "second package %q after package %q", clip(name), p.file.Package)
	}
	p.file.Package = name
	return p.end(line)
}

func (p *parser) config(line int) error {
	typ, ok, err := p.arg()
	if err != nil {
		return err
	}
	if !ok {
		return p.errorf(line, "write config TYPE 'NAME', e.g. config queue 'eth1'", "config without a section type")
	}
	if !validType(typ) {
		return p.errorf(line, "a type is printable ASCII without spaces, e.g. queue", "invalid section type %q", clip(typ))
	}
	name, _, err := p.arg()
	if err != nil {
		return err
	}
	if err := p.end(line); err != nil {
		return err
	}
	if name == "" {
		s := &Section{Type: typ, Anonymous: true, Line: line}
		p.file.Sections = append(p.file.Sections, s)
		s.Name = anonymousName(len(p.file.Sections), typ)
		p.section = s
		return nil
	}
	if !validName(name, false) {
		return p.errorf(line, "section names use only letters, digits and '_', e.g. 'wan_7'", "invalid section name %q", clip(name))
	}
	if s := p.named[name]; s != nil {
		if s.Type != typ {
			return p.errorf(line, "rename one of the sections", "section %q of type %q repeats section of type %q from line %d", name, typ, s.Type, s.Line)
		}
		p.section = s
		return nil
	}
	s := &Section{Type: typ, Name: name, Line: line}
	p.file.Sections = append(p.file.Sections, s)
	if p.named == nil {
		p.named = map[string]*Section{}
	}
	p.named[name] = s
	p.section = s
	return nil
}

func (p *parser) option(line int, list bool) error {
	kw := "option"
	if list {
		kw = "list"
	}
	name, ok, err := p.arg()
	if err != nil {
		return err
	}
	if !ok {
		return p.errorf(line, "write "+kw+" NAME 'VALUE'", "%s without a name", kw)
	}
	if !validName(name, false) {
		return p.errorf(line, "option names use only letters, digits and '_'", "invalid option name %q", clip(name))
	}
	value, _, err := p.arg()
	if err != nil {
		return err
	}
	if err := p.end(line); err != nil {
		return err
	}
	if p.section == nil {
		return p.errorf(line, "add a config line (e.g. config queue 'eth1') above it", "%s %q before any config section", kw, name)
	}
	if list {
		p.section.add(name, value, line)
	} else {
		p.section.set(name, value, line)
	}
	return nil
}

// end checks that nothing but blanks or a comment follows on the statement.
func (p *parser) end(line int) error {
	p.skipBlanks()
	if p.eof() {
		return nil
	}
	switch p.data[p.pos] {
	case '#':
		p.skipComment()
		return nil
	case '\n', ';':
		return nil
	}
	extra, _, err := p.arg()
	if err != nil {
		return err
	}
	return p.errorf(line, "quote values that contain blanks, e.g. option name 'a b'", "unexpected %q after the last argument", clip(extra))
}

// arg reads one argument. ok is false when the statement has no more
// arguments. A value of ” is present but empty.
func (p *parser) arg() (val string, ok bool, err error) {
	p.skipBlanks()
	var b strings.Builder
	for !p.eof() {
		c := p.data[p.pos]
		switch {
		case c == '\'' || c == '"':
			if err := p.quoted(&b, c); err != nil {
				return "", false, err
			}
			ok = true
			continue
		case c == '\\':
			if p.continuation() {
				// The joined line continues this argument unless it starts blank.
				if !p.eof() && isBlank(p.data[p.pos]) {
					return b.String(), ok, nil
				}
				continue
			}
			p.pos++
			c = p.data[p.pos]
		case isBlank(c) || c == '\n' || c == ';' || c == '#':
			return b.String(), ok, nil
		}
		b.WriteByte(c)
		ok = true
		p.pos++
	}
	return b.String(), ok, nil
}

// quoted reads a quoted part starting at its opening quote q.
func (p *parser) quoted(b *strings.Builder, q byte) error {
	open := p.line
	p.pos++
	for !p.eof() {
		c := p.data[p.pos]
		switch {
		case c == q:
			p.pos++
			return nil
		case c == '\\' && q == '"':
			if p.continuation() {
				continue
			}
			p.pos++
			c = p.data[p.pos]
		case c == '\n':
			p.line++
		}
		b.WriteByte(c)
		p.pos++
	}
	return p.errorf(open, fmt.Sprintf("close the %c quote opened on this line", q), "unterminated %c quote", q)
}

// clip shortens text quoted in an error message.
func clip(s string) string {
	const most = 40
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
