package openwrttest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/openwrt"
	"github.com/sqmkit/sqmkit/internal/rpcd"
)

// luciFile reads one of luci-app-sqmkit's files by its destination.
func luciFile(t *testing.T, dst string) []byte {
	t.Helper()
	for _, f := range openwrt.LuCIFiles {
		if f.Dst == dst {
			b, err := openwrt.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("luci-app-sqmkit has no %s", dst)
	return nil
}

// TestACLListsEveryMethod: the ACL grants every method of the plugin, the
// ones that act (test, tune, write, undo) only in its write set; and every
// method a view calls is one the plugin has.
func TestACLListsEveryMethod(t *testing.T) {
	var acl map[string]struct {
		Read, Write struct {
			Ubus map[string][]string `json:"ubus"`
		}
	}
	if err := json.Unmarshal(luciFile(t, "usr/share/rpcd/acl.d/luci-app-sqmkit.json"), &acl); err != nil {
		t.Fatal(err)
	}
	a := acl["luci-app-sqmkit"]
	read, write := rpcd.Methods()
	if got := slices.Sorted(slices.Values(a.Read.Ubus["sqmkit"])); !slices.Equal(got, read) {
		t.Errorf("the ACL reads %q, the plugin's read methods are %q", got, read)
	}
	if got := slices.Sorted(slices.Values(a.Write.Ubus["sqmkit"])); !slices.Equal(got, write) {
		t.Errorf("the ACL writes %q, the plugin's write methods are %q", got, write)
	}
	all := append(slices.Clone(read), write...)
	called := regexp.MustCompile(`object: 'sqmkit', method: '(\w+)'`)
	for _, f := range openwrt.LuCIFiles {
		if !strings.HasSuffix(f.Dst, ".js") {
			continue
		}
		b, _ := openwrt.Read(f)
		for _, m := range called.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(all, m[1]) {
				t.Errorf("%s calls %s, which the plugin does not have", f.Dst, m[1])
			}
		}
	}
}

// TestMenuNamesTheViews: every view the menu opens is installed, and the
// menu's root asks for the ACL.
func TestMenuNamesTheViews(t *testing.T) {
	var menu map[string]struct {
		Action  struct{ Type, Path string }
		Depends struct {
			ACL []string
		}
	}
	if err := json.Unmarshal(luciFile(t, "usr/share/luci/menu.d/luci-app-sqmkit.json"), &menu); err != nil {
		t.Fatal(err)
	}
	views := 0
	for node, m := range menu {
		if m.Action.Type == "view" {
			views++
			luciFile(t, "www/luci-static/resources/view/"+m.Action.Path+".js")
		}
		if node == "admin/network/sqmkit" && !slices.Contains(m.Depends.ACL, "luci-app-sqmkit") {
			t.Errorf("%s does not depend on the ACL", node)
		}
	}
	if views != 4 {
		t.Errorf("%d views in the menu, want status, test, tune and autorate", views)
	}
}

// TestViewsRequireInstalledModules: every sqmkit module a view requires is
// one the package installs (the browser test serves the source tree, where
// a file the package forgets still loads).
func TestViewsRequireInstalledModules(t *testing.T) {
	req := regexp.MustCompile(`(?m)^'require sqmkit\.(\w+)`)
	n := 0
	for _, f := range openwrt.LuCIFiles {
		if !strings.Contains(f.Dst, "/view/sqmkit/") {
			continue
		}
		for _, m := range req.FindAllStringSubmatch(string(luciFile(t, f.Dst)), -1) {
			luciFile(t, "www/luci-static/resources/sqmkit/"+m[1]+".js")
			n++
		}
	}
	if n < 4 { // chart in test and autorate, notify in status, test and tune
		t.Errorf("%d sqmkit modules required by the views, want the chart's and notify's", n)
	}
}

// potPath is luci-app-sqmkit's translation template, where luci.mk keeps
// an app's (po/templates/NAME.pot); translations go beside it in
// po/LANG/sqmkit.po.
const potPath = "../../internal/openwrt/files/luci/po/templates/sqmkit.pot"

// jsString is a single-quoted JavaScript string literal.
var jsString = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

// msgids are the strings the views and modules pass to _(), with the
// places they are used, as LuCI's i18n scan lists them.
func msgids(t *testing.T) map[string][]string {
	t.Helper()
	call := regexp.MustCompile(`_\(\s*'((?:[^'\\]|\\.)*)'`)
	out := map[string][]string{}
	for _, f := range openwrt.LuCIFiles {
		if !strings.HasSuffix(f.Dst, ".js") {
			continue
		}
		for i, line := range strings.Split(string(luciFile(t, f.Dst)), "\n") {
			for _, m := range call.FindAllStringSubmatch(line, -1) {
				id := strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[1])
				out[id] = append(out[id], fmt.Sprintf("%s:%d", strings.TrimPrefix(f.Src, "luci/"), i+1))
			}
		}
	}
	return out
}

// pot is the template for ids, sorted as LuCI's scan sorts them.
func pot(ids map[string][]string) string {
	var b strings.Builder
	b.WriteString("msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=UTF-8\"\n")
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		b.WriteString("\n")
		for _, at := range ids[id] {
			b.WriteString("#: " + at + "\n")
		}
		fmt.Fprintf(&b, "msgid \"%s\"\nmsgstr \"\"\n", esc.Replace(id))
	}
	return b.String()
}

// TestTranslationTemplate: the template holds exactly the strings the
// pages pass to _() (SQMKIT_WRITE_POT=1 writes it), and no text a person
// reads is left out of _(): a literal with words in it (two words, or a
// unit after a format) outside _() fails, save attribute values (classes,
// styles, ids) and the modules' names.
func TestTranslationTemplate(t *testing.T) {
	want := pot(msgids(t))
	if os.Getenv("SQMKIT_WRITE_POT") != "" {
		if err := os.MkdirAll(filepath.Dir(potPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(potPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(potPath)
	if err != nil || string(got) != want {
		t.Errorf("%s is not the pages' strings (%v); run SQMKIT_WRITE_POT=1 go test ./openwrt/test -run TestTranslationTemplate", potPath, err)
	}
	prose := regexp.MustCompile(`[A-Za-z]{3,} [A-Za-z]{2,}|%[-.0-9]*[a-z] ?[A-Za-z]+/s|%.*ms\b`)
	attr := regexp.MustCompile(`'(class|style|id|for|type|placeholder|data-[a-z-]+)':\s*$`)
	for _, f := range openwrt.LuCIFiles {
		if !strings.HasSuffix(f.Dst, ".js") {
			continue
		}
		for i, line := range strings.Split(string(luciFile(t, f.Dst)), "\n") {
			// comments are not shown: an apostrophe in one is no literal
			if trim := strings.TrimSpace(line); strings.HasPrefix(trim, "*") || strings.HasPrefix(trim, "/*") || strings.HasPrefix(trim, "//") || strings.HasPrefix(line, "'require") || line == "'use strict';" {
				continue
			}
			for _, loc := range jsString.FindAllStringSubmatchIndex(line, -1) {
				lit := line[loc[2]:loc[3]]
				before := strings.TrimRight(line[:loc[0]], " ")
				if !prose.MatchString(lit) || strings.HasSuffix(before, "_(") || attr.MatchString(line[:loc[0]]) {
					continue
				}
				t.Errorf("%s:%d: %q is shown untranslated; pass it through _()", f.Src, i+1, lit)
			}
		}
	}
}
