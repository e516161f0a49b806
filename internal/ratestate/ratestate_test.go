package ratestate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

func TestSaveApplyClear(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	q := config.Queue{Interface: "wan", Download: 38000, Upload: 7600}
	if ok, err := Apply(dir, &q); ok || err != nil || q.Download != 38000 {
		t.Fatalf("nothing kept: applied %v %v %+v", ok, err, q)
	}
	if err := Save(dir, "wan", Rates{Rates: config.Rates{Download: 31000, Upload: 7600}, By: "sqmkit autorate", At: at}); err != nil {
		t.Fatal(err)
	}
	if ok, err := Apply(dir, &q); !ok || err != nil || q.Download != 31000 || q.Upload != 7600 {
		t.Fatalf("applied %v %v %+v", ok, err, q)
	}
	if len(q.Notes) != 1 || !strings.Contains(q.Notes[0], "download 31000 kbit/s set by sqmkit autorate at 2026-11-23T12:00:00Z (config 38000)") {
		t.Errorf("notes %q", q.Notes)
	}
	// A direction the config does not shape is never shaped by a kept rate.
	off := config.Queue{Interface: "wan", Download: 0, Upload: 7600}
	Apply(dir, &off)
	if off.Download != 0 {
		t.Errorf("unshaped download took the kept rate: %+v", off)
	}
	if err := Clear(dir, "wan"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Load(dir, "wan"); ok {
		t.Error("cleared state still loads")
	}
	if err := Clear(dir, "wan"); err != nil {
		t.Errorf("clearing twice: %v", err)
	}
}

func TestCorruptState(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wan.json"), []byte("{"), 0o644)
	q := config.Queue{Interface: "wan", Download: 38000}
	if _, err := Apply(dir, &q); err == nil || !strings.Contains(err.Error(), "run sqmkit start") {
		t.Errorf("corrupt state: err %v", err)
	}
}

// The kept file's keys name their unit, as they did before the rates
// became config.Rates: a file an older sqmkit wrote still loads.
func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	const kept = `{"download_kbit": 31000, "upload_kbit": 7600, "by": "sqmkit rate", "at": "2026-11-23T12:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, "wan.json"), []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	r, ok, err := Load(dir, "wan")
	if !ok || err != nil || r.Download != 31000 || r.Upload != 7600 || r.By != "sqmkit rate" {
		t.Fatalf("loaded %+v %v %v", r, ok, err)
	}
	if err := Save(dir, "wan", r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "wan.json"))
	for _, k := range []string{`"download_kbit":31000`, `"upload_kbit":7600`, `"by":"sqmkitrate"`} {
		if !strings.Contains(strings.ReplaceAll(string(b), " ", ""), k) {
			t.Errorf("saved %s, want %s in it", b, k)
		}
	}
}
