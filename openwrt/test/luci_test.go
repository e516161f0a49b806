package openwrttest

import (
	"encoding/json"
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
