package config

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/statefile"

	"github.com/sqmkit/sqmkit/internal/uci"
)

// Rates are a queue's download and upload, kbit/s: the one pair of rates
// the config, tune, autorate and the kept state (ratestate) speak of.
type Rates struct {
	Download int `json:"download_kbit,omitempty"`
	Upload   int `json:"upload_kbit,omitempty"`
}

// Check applies the config's rules for rates to a pair about to be
// written (a tune result, an undo record): each 0 or within
// MinRateKbit…MaxRateKbit, and not both 0, which would stop shaping.
func (r Rates) Check() error {
	q := Queue{Section: "-", Download: r.Download, Upload: r.Upload}
	for _, f := range []struct {
		opt string
		v   int
	}{{"download", r.Download}, {"upload", r.Upload}} {
		if f.v < 0 || f.v > 0 && f.v < MinRateKbit || f.v > MaxRateKbit {
			return q.Bad(f.opt, f.v, "%d kbit/s is not a rate to write (0, or %d to %d kbit/s)", f.v, MinRateKbit, MaxRateKbit)
		}
	}
	if r.Download == 0 && r.Upload == 0 {
		return q.Bad("download", 0, "download and upload are both 0, which would stop shaping")
	}
	return nil
}

// WriteRates stores download and upload in section's options of the SQM
// file and returns the values they had. On an OpenWrt router (root "/",
// the default file, a `uci` on PATH) it goes through `uci set` and
// `uci commit`, so LuCI and procd's reload trigger see the change as any
// other; elsewhere it edits the file in place, changing only those two
// lines (or adding them under the section's header) and keeping every
// comment, blank line and the order.
func WriteRates(root, file, section string, r Rates) (old Rates, err error) {
	if err := r.Check(); err != nil {
		return old, err
	}
	path := Path(root, file)
	f, data, err := readFile(path)
	if err != nil {
		return old, err
	}
	s := f.Lookup(section)
	if s == nil || s.Type != "queue" {
		return old, fmt.Errorf("%s: no queue section %q", path, section)
	}
	for _, o := range s.Options {
		if o == nil {
			continue
		}
		v, _ := strconv.Atoi(o.Value())
		switch o.Name {
		case "download":
			old.Download = v
		case "upload":
			old.Upload = v
		}
	}
	if uciPath, err := exec.LookPath("uci"); err == nil && (root == "/" || root == "") && file == "" {
		return old, viaUCI(uciPath, s.Name, r)
	}
	return old, editFile(path, data, s, r)
}

func viaUCI(uciPath, section string, r Rates) error {
	for _, args := range [][]string{
		{"set", fmt.Sprintf("sqm.%s.download=%d", section, r.Download)},
		{"set", fmt.Sprintf("sqm.%s.upload=%d", section, r.Upload)},
		{"commit", "sqm"},
	} {
		if out, err := exec.Command(uciPath, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("uci %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// editFile rewrites the lines of s's download and upload options; an
// option the section lacks goes right under its header.
func editFile(path string, data []byte, s *uci.Section, r Rates) error {
	lines := strings.SplitAfter(string(data), "\n")
	want := map[string]int{"download": r.Download, "upload": r.Upload}
	var add []string
	for _, name := range []string{"download", "upload"} {
		var at *uci.Option
		for _, o := range s.Options {
			if o != nil && o.Name == name {
				at = o
			}
		}
		line := fmt.Sprintf("\toption %s '%d'\n", name, want[name])
		if at == nil {
			add = append(add, line)
			continue
		}
		i := at.Line - 1
		if i < 0 || i >= len(lines) || !strings.Contains(lines[i], name) {
			return fmt.Errorf("%s:%d: cannot find option %s to rewrite; set it by hand to %d", path, at.Line, name, want[name])
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		lines[i] = indent + strings.TrimLeft(line, "\t")
	}
	if len(add) > 0 {
		h := s.Line // the header's index + 1: insert after it
		lines = append(lines[:h], append(add, lines[h:]...)...)
	}
	out := strings.Join(lines, "")
	// the result must parse to the values written, or nothing is written
	g, err := uci.Parse(path, []byte(out))
	if err == nil {
		if ns := g.Lookup(s.Name); ns == nil || optionValue(ns, "download") != strconv.Itoa(r.Download) || optionValue(ns, "upload") != strconv.Itoa(r.Upload) {
			err = fmt.Errorf("rewriting %s did not give download %d and upload %d; set them by hand", path, r.Download, r.Upload)
		}
	}
	if err != nil {
		return err
	}
	return replaceFile(path, []byte(out))
}

// replaceFile replaces the file path names with b whole (a rename in its
// directory), keeping its mode. A symlinked /etc/config/sqm is written
// through: the link stays and its target gets the new text. A write that
// fails (a full filesystem) leaves the old file and no temporary one
// (TestWriteRatesSymlinkAndFullDisk).
func replaceFile(path string, b []byte) error { return statefile.WriteThrough(path, b) }

func optionValue(s *uci.Section, name string) string {
	for _, o := range s.Options {
		if o != nil && o.Name == name {
			return o.Value()
		}
	}
	return ""
}
