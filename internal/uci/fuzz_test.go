package uci

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// export writes f the way `uci export` does: single quotes, a quote inside a
// value as '\”. Tests use it to check that what Parse reads survives a
// write and a second read unchanged.
func export(f *File) []byte {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b bytes.Buffer
	if f.Package != "" {
		b.WriteString("package " + f.Package + "\n")
	}
	for _, s := range f.Sections {
		b.WriteString("\nconfig " + q(s.Type))
		if !s.Anonymous {
			b.WriteString(" " + q(s.Name))
		}
		b.WriteString("\n")
		for _, o := range s.Options {
			kw := "option"
			if o.List {
				kw = "list"
			}
			for _, v := range o.Values {
				b.WriteString("\t" + kw + " " + o.Name + " " + q(v) + "\n")
			}
		}
	}
	return b.Bytes()
}

// shape is a File without line numbers, for comparing two parses.
func shape(f *File) []string {
	out := []string{"package " + f.Package}
	for _, s := range f.Sections {
		out = append(out, s.Type+" "+s.Name)
		for _, o := range s.Options {
			out = append(out, o.Name+"="+strings.Join(o.Values, "\x00"))
		}
	}
	return out
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*")
	more, _ := filepath.Glob("testdata/uci-cli/*")
	files = append(files, more...)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("config q\n option a 'x\n"))
	f.Add([]byte("c t;o a b;l c d\\\ne"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed, err := Parse("fuzz", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error %v is not an *Error with a line inside the input", err)
			}
			return
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, s := range parsed.Sections {
			if s.Line < 1 || s.Line > lines || !validType(s.Type) || !validName(s.Name, false) {
				t.Fatalf("section %+v: bad line, type or name", s)
			}
			for _, o := range s.Options {
				if o.Line < s.Line || o.Line > lines || !validName(o.Name, false) || len(o.Values) == 0 {
					t.Fatalf("option %+v in section at line %d: bad line, name or values", o, s.Line)
				}
				if !o.List && (len(o.Values) != 1 || o.Values[0] == "") {
					t.Fatalf("option %q holds %q; an option has one non-empty value", o.Name, o.Values)
				}
			}
		}
		again, err := Parse("export", export(parsed))
		if err != nil {
			t.Fatalf("re-parsing the export failed: %v\n%s", err, export(parsed))
		}
		if !reflect.DeepEqual(shape(parsed), shape(again)) {
			t.Fatalf("export changed the file:\n%q\n%q", shape(parsed), shape(again))
		}
	})
}
