// Package uci reads OpenWrt UCI configuration files (/etc/config/*) the way
// libuci does: the same quoting, escaping, comment and merge rules, the same
// names for anonymous sections, but with errors that say how to fix the file.
package uci

import (
	"fmt"
	"strconv"
	"strings"
)

// File is one parsed configuration file.
type File struct {
	Name     string // as given to Parse; used in error messages
	Package  string // from a `package` line; "" when the file has none
	Sections []*Section
}

// Section is one `config TYPE ['NAME']` block. Repeating a named section in
// the same file adds to it, as libuci does.
type Section struct {
	Type      string
	Name      string // for anonymous sections the name libuci shows, e.g. cfg01b68a
	Anonymous bool
	Line      int
	Options   []*Option // in the order libuci keeps them

	// byName indexes Options while parsing, so every statement costs O(1)
	// and a file with many options parses in linear time.
	byName map[string]int
}

// Option is an `option` (one value) or a `list` (any number of values).
type Option struct {
	Name   string
	Values []string // exactly one for an option
	List   bool
	Line   int // line of the last statement that set or extended it
}

// Value is the option's value as `uci get` prints it: list items are joined
// by spaces.
func (o *Option) Value() string { return strings.Join(o.Values, " ") }

// Error is a parse error at one line of a file.
type Error struct {
	File string
	Line int
	Msg  string
	Fix  string
}

func (e *Error) Error() string {
	if e.Fix == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s (fix: %s)", e.File, e.Line, e.Msg, e.Fix)
}

// Lookup returns the section named sel, or selected by libuci's extended
// syntax @TYPE[INDEX] (negative indexes count from the end); nil if none.
func (f *File) Lookup(sel string) *Section {
	if typ, idx, ok := parseExtended(sel); ok {
		var of []*Section
		for _, s := range f.Sections {
			if typ == "" || s.Type == typ {
				of = append(of, s)
			}
		}
		if idx < 0 {
			idx += len(of)
		}
		if idx < 0 || idx >= len(of) {
			return nil
		}
		return of[idx]
	}
	for _, s := range f.Sections {
		if s.Name == sel {
			return s
		}
	}
	return nil
}

func parseExtended(sel string) (typ string, idx int, ok bool) {
	rest, found := strings.CutPrefix(sel, "@")
	if !found || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	typ, num, found := strings.Cut(rest[:len(rest)-1], "[")
	if !found {
		return "", 0, false
	}
	idx, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, false
	}
	return typ, idx, true
}

// Option returns the option called name, or nil.
func (s *Section) Option(name string) *Option {
	if s.byName != nil {
		if i, ok := s.byName[name]; ok {
			return s.Options[i]
		}
		return nil
	}
	for _, o := range s.Options {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// Get returns the option's value as `uci get` prints it and whether it is set.
func (s *Section) Get(name string) (string, bool) {
	o := s.Option(name)
	if o == nil {
		return "", false
	}
	return o.Value(), true
}

// set replaces an option where it stands, as libuci does. An empty value
// changes nothing: libuci ignores `option x ”` and a bare `option x` while
// it loads a file, so an earlier value stays (TestOptionSemantics).
func (s *Section) set(name, value string, line int) {
	if value == "" {
		return
	}
	o := &Option{Name: name, Values: []string{value}, Line: line}
	if i, ok := s.byName[name]; ok {
		s.Options[i] = o
		return
	}
	s.push(o)
}

func (s *Section) push(o *Option) {
	if s.byName == nil {
		s.byName = map[string]int{}
	}
	s.byName[o.Name] = len(s.Options)
	s.Options = append(s.Options, o)
}

// add appends to a list; an existing single value becomes the list's first
// item, where it stands, as in libuci.
func (s *Section) add(name, value string, line int) {
	o := s.Option(name)
	if o == nil {
		s.push(&Option{Name: name, Values: []string{value}, List: true, Line: line})
		return
	}
	o.Values = append(o.Values, value)
	o.List, o.Line = true, line
}

// anonymousName is the name libuci gives an unnamed section when it loads a
// file: "cfg", the section's 1-based position in the file, and the low 16
// bits of the djb hash of its type (options are added after the name is
// fixed, so they do not count).
func anonymousName(position int, typ string) string {
	h := uint32(5381)
	for i := 0; i < len(typ); i++ {
		h = h*33 + uint32(typ[i])
	}
	return fmt.Sprintf("cfg%02x%04x", position, h&0xffff)
}

// validName reports whether s is a valid section or option name: libuci
// allows only ASCII letters, digits and '_' (and '-' in package names).
func validName(s string, pkg bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case c == '-' && pkg:
		default:
			return false
		}
	}
	return true
}

// validType reports whether s is a valid section type: printable ASCII
// without spaces.
func validType(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 33 || s[i] > 126 {
			return false
		}
	}
	return true
}
