package config

import (
	"fmt"
	"strings"
)

// FieldError is a bad value of one option of one queue: which option, the
// value, why it is wrong, how to fix it, and where it was set. Every
// validation error is one, wherever it is found (loading, flags, Validate,
// planning an option string), so callers never parse messages to find the
// option to blame.
type FieldError struct {
	Origin  string // "FILE:LINE", "--flag", or "" when the option kept its default
	Section string
	Option  string // the UCI option, e.g. "download", "eqdisc_opts"
	Value   string
	Why     string
	Fix     string // how to set a valid value; "" when Why says it
}

func (e *FieldError) Error() string {
	s := fmt.Sprintf("sqm.%s.%s: %s", e.Section, e.Option, e.Why)
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	if e.Origin != "" {
		s = e.Origin + ": " + s
	}
	return s
}

// Bad returns the FieldError for option opt of q, whose value is value.
func (q Queue) Bad(opt string, value any, format string, a ...any) *FieldError {
	return &FieldError{Origin: q.Origin(opt), Section: q.Section, Option: opt, Value: fmt.Sprint(value),
		Why: fmt.Sprintf(format, a...), Fix: fixFor(opt)}
}

// fixFor says how to set a valid value of opt, by file and by flag.
func fixFor(opt string) string {
	f := fieldFor(opt)
	if f == nil {
		return ""
	}
	if f.flag == "" {
		return fmt.Sprintf("set option %s '%s'", f.opt, f.example)
	}
	flagValue := f.example
	if strings.ContainsRune(flagValue, ' ') {
		flagValue = "'" + flagValue + "'"
	}
	return fmt.Sprintf("set option %s '%s' or --%s %s", f.opt, f.example, f.flag, flagValue)
}
