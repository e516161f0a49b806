package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocReferences: every file the repository's docs and code name
// exists, every section they cite by title is a heading of that file,
// and every relative Markdown link resolves; nothing cites a spec that
// is not in the repository. Generated paths (bin/, lab/.cache, lab/results)
// are not checked.
func TestDocReferences(t *testing.T) {
	root := "../.."
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" || rel == "lab/.cache" || rel == "lab/results" || strings.HasSuffix(rel, "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".md", ".go", ".sh", ".js":
			files = append(files, rel)
		}
		if d.Name() == "Makefile" {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d files found", len(files))
	}
	path := regexp.MustCompile("(?:^|[\\s`(\"'])((?:docs|internal|cmd|lab|openwrt|scripts|linux/systemd)/[A-Za-z0-9_./@-]*[A-Za-z0-9_@-])")
	section := regexp.MustCompile(`((?:docs/[a-z-]+|lab/README)\.md),? "([^"]+)"`)
	link := regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)
	generated := regexp.MustCompile(`^(lab/\.cache|lab/results|bin)(/|$)`)
	placeholder := regexp.MustCompile(`(^|/)[A-Z][A-Z_]+(\.|/|$)`) // lab/profiles/NAME.conf
	comment := regexp.MustCompile(`\s*\n\s*(//|#)?\s*`)            // a title broken over comment lines
	headings := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.Contains(text, "spec §") && f != "cmd/sqmkit/docs_test.go" {
			t.Errorf("%s cites a spec section that is not in the repository", f)
		}
		for _, m := range path.FindAllStringSubmatch(text, -1) {
			p := strings.TrimSuffix(m[1], ".")
			if generated.MatchString(p) || placeholder.MatchString(p) || strings.Contains(p, "...") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", f, p)
			}
		}
		for _, m := range section.FindAllStringSubmatch(text, -1) {
			h, ok := headings[m[1]]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, m[1]))
				if err != nil {
					continue // reported above
				}
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "#") {
						h += l + "\n"
					}
				}
				headings[m[1]] = h
			}
			if title := comment.ReplaceAllString(m[2], " "); !strings.Contains(h, title) {
				t.Errorf("%s cites %s, %q: no such heading", f, m[1], title)
			}
		}
		if filepath.Ext(f) != ".md" {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links %s, which does not resolve from %s", f, m[1], filepath.Dir(f))
			}
		}
	}
}

// sources calls fn with every file of the tree the length tests judge:
// not .git, the builds, the caches or the lab's results.
func sources(t *testing.T, fn func(path string, d fs.DirEntry) error) {
	t.Helper()
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && slices.Contains([]string{".git", "bin", ".cache", "results"}, d.Name()):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		}
		return fn(p, d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFileLength: no source file over 600 lines; a longer one holds more
// than one job and is split by job (lab/trace.go's plot, lab/result.go).
func TestFileLength(t *testing.T) {
	sources(t, func(p string, d fs.DirEntry) error {
		switch filepath.Ext(p) {
		case ".go", ".sh", ".js":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > 600 {
			t.Errorf("%s: %d lines, more than 600", p, n)
		}
		return nil
	})
}

// TestFunctionLength: no Go function over 100 lines (a command's body
// reads as parse → call → print, the work in the package that owns it;
// autorate's step as the decision it makes, one rule per helper).
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	sources(t, func(p string, _ fs.DirEntry) error {
		if filepath.Ext(p) != ".go" {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > 100 {
				t.Errorf("%s: %s is %d lines, more than 100", p, fn.Name.Name, n)
			}
		}
		return nil
	})
}

// TestReadmeFiguresInResults: every lab figure the README quotes (a number
// with its unit, in a paragraph that cites docs/results.md) is in
// docs/results.md, the table behind it: a README figure the lab no longer
// backs fails here, not in a reader's hands.
func TestReadmeFiguresInResults(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile("../../docs/results.md")
	if err != nil {
		t.Fatal(err)
	}
	figure := regexp.MustCompile(`(?:p95 )?(\d+(?:\.\d+)?) ?(ms|%|minutes|min|Mbit/s|MB|s)\b|p95 (\d+(?:\.\d+)?)`)
	backed := string(results)
	checked := 0
	for _, para := range strings.Split(string(readme), "\n\n") {
		if !strings.Contains(para, "docs/results.md") {
			continue
		}
		for _, m := range figure.FindAllStringSubmatch(strings.Join(strings.Fields(para), " "), -1) {
			n := m[1] + m[3]
			if !regexp.MustCompile(`(^|[^\d.])` + regexp.QuoteMeta(n) + `([^\d]|$)`).MatchString(backed) {
				t.Errorf("README quotes %q (%q), which docs/results.md does not hold", n, m[0])
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no README figure found to check: the test reads nothing")
	}
}
