package openwrttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/openwrt"
)

// oldestGo is the Go of the oldest OpenWrt release the feed supports:
// 24.10's packages feed ships 1.23.12 (25.12: 1.26.6, master: 1.26.7), and
// golang-package.mk builds with GOTOOLCHAIN=local, so go.mod may not ask
// for more.
const oldestGo = "1.23.12"

// The package builds with oldestGo: go.mod's go line asks for no more,
// `go mod tidy` keeps it there (no module needs a newer Go), and go vet's
// stdversion analyzer finds no newer standard library in the router build
// or anywhere else. No second toolchain is needed to tell.
func TestFeedBuildsWithOldestGo(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil || versionLess(oldestGo, string(m[1])) {
		t.Errorf("go.mod's go line is %q; OpenWrt 24.10 builds with Go %s", m, oldestGo)
	}
	if regexp.MustCompile(`(?m)^toolchain `).Match(mod) {
		t.Error("go.mod names a toolchain; GOTOOLCHAIN=local would refuse it")
	}
	// make test runs go vet ./... itself; the router build's files only here
	for _, c := range [][]string{{"go", "mod", "tidy", "-diff"}, {"go", "vet", "-tags", "router", "./cmd/sqmkit"}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
}

// versionLess compares Go versions like 1.23.12 numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = atoi(pa[i])
		}
		if i < len(pb) {
			y = atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// OpenWrt's prepared stamp hashes the package directory and
// PKG_FILE_DEPENDS only: every path Build/Prepare copies must be in it, or
// a change to the code alone reuses the stale build. The CAKE option must
// be in PKG_CONFIG_DEPENDS, or toggling it does not rebuild.
func TestFeedRebuildsOnChange(t *testing.T) {
	mk, err := os.ReadFile("../sqmkit/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) []string {
		m := regexp.MustCompile(`(?m)^` + name + `:=(.*)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile sets no %s", name)
		}
		return strings.Fields(string(m[1]))
	}
	deps := get("PKG_FILE_DEPENDS")
	prep := string(mk)[strings.Index(string(mk), "define Build/Prepare"):]
	prep = prep[:strings.Index(prep, "endef")]
	cp := regexp.MustCompile(`(?m)^\s*\$\(CP\)\s+(.*)$`).FindStringSubmatch(prep)
	if cp == nil {
		t.Fatal("Build/Prepare copies nothing")
	}
	srcs := strings.Fields(cp[1])
	for _, src := range srcs[:len(srcs)-1] {
		if !slices.Contains(deps, src) {
			t.Errorf("Build/Prepare copies %s, which PKG_FILE_DEPENDS %q does not hash", src, deps)
		}
	}
	if !slices.Contains(get("PKG_CONFIG_DEPENDS"), "CONFIG_SQMKIT_CAKE") {
		t.Error("PKG_CONFIG_DEPENDS lacks CONFIG_SQMKIT_CAKE")
	}
}

// The feed's packages and sqmkit install put the same files in the same
// places with the same modes: sqmkit's, and luci-app-sqmkit's.
func TestFeedInstallsTheseFiles(t *testing.T) {
	for pkg, files := range map[string][]openwrt.File{"sqmkit": openwrt.Files, "luci-app-sqmkit": openwrt.LuCIFiles} {
		mk := makefileInstalls(t, pkg)
		if len(mk) != len(files) {
			t.Errorf("%s's Makefile installs %d files, sqmkit install %d", pkg, len(mk), len(files))
		}
		for _, f := range files {
			i := slices.IndexFunc(mk, func(m installed) bool { return m.dst == f.Dst })
			if i < 0 {
				t.Errorf("%s's Makefile does not install %s", pkg, f.Dst)
				continue
			}
			want, err := openwrt.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(mk[i].src)
			if err != nil || string(got) != string(want) || mk[i].mode != f.Mode {
				t.Errorf("%s: the Makefile installs %s (mode %v), sqmkit install %s (mode %v)", f.Dst, mk[i].src, mk[i].mode, f.Src, f.Mode)
			}
		}
	}
}

// makefileInstalls reads the $(INSTALL_BIN) and $(INSTALL_DATA) lines of the
// feed Makefile's Package/sqmkit/install: source file (in this checkout),
// destination under the root, and mode.
func makefileInstalls(t testing.TB, pkg string) []installed {
	t.Helper()
	mk, err := os.ReadFile("../" + pkg + "/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+):=(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = m[2]
	}
	expand := func(s string) string {
		for i := 0; i < 4; i++ {
			s = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(s, func(v string) string {
				name := v[2 : len(v)-1]
				switch name {
				case "CURDIR":
					return "../" + pkg
				case "INSTALL_BIN", "INSTALL_DATA", "INSTALL_DIR", "1":
					return v
				}
				return vars[name]
			})
		}
		return s
	}
	block := string(mk)
	block = block[strings.Index(block, "define Package/"+pkg+"/install"):]
	block = block[:strings.Index(block, "endef")]
	block = strings.ReplaceAll(block, "\\\n", " ")
	var out []installed
	for _, m := range regexp.MustCompile(`\$\((INSTALL_BIN|INSTALL_DATA)\)\s+(.*)`).FindAllStringSubmatch(block, -1) {
		args := strings.Fields(expand(m[2]))
		dest := strings.TrimPrefix(args[len(args)-1], "$(1)/")
		mode := os.FileMode(0o644)
		if m[1] == "INSTALL_BIN" {
			mode = 0o755
		}
		for _, src := range args[:len(args)-1] {
			to := dest
			if strings.HasSuffix(dest, "/") {
				to = dest + filepath.Base(src)
			}
			out = append(out, installed{src, to, mode})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s's Makefile installs no file", pkg)
	}
	return out
}

type installed struct {
	src, dst string
	mode     os.FileMode
}
