package applied

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "applied")}
	if _, ok, err := s.Get("wan"); ok || err != nil {
		t.Fatalf("an empty store: ok %v, err %v", ok, err)
	}
	if rs, err := s.All(); len(rs) != 0 || err != nil {
		t.Fatalf("an empty store lists %v, %v", rs, err)
	}
	recs := []Record{
		{Section: "wan", Device: "wan", Backend: "cake", IFB: "ifb4wan", IFBCreated: true, IFBIndex: 7, Egress: true, Ingress: true, At: time.Unix(1, 0).UTC()},
		{Section: "b", Device: "eth1", Backend: "nss", Egress: true, At: time.Unix(2, 0).UTC()},
	}
	for _, r := range recs {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.Get("wan")
	if !ok || err != nil || got != recs[0] {
		t.Errorf("Get(wan) = %+v %v %v, want %+v", got, ok, err, recs[0])
	}
	all, err := s.All()
	if err != nil || len(all) != 2 || all[0].Device != "eth1" || all[1].Device != "wan" {
		t.Errorf("All() = %+v, %v; want eth1 then wan", all, err)
	}
	if err := s.Delete("wan"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get("wan"); ok {
		t.Error("a deleted record is still there")
	}
	if err := s.Delete("wan"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
}

func TestStoreRefusesBadRecords(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":          "{",
		"another device":    `{"device":"lan"}`,
		"larger than a cap": `{"device":"wan","section":"` + strings.Repeat("x", maxRecord) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := Store{Dir: t.TempDir()}
			os.WriteFile(filepath.Join(s.Dir, "wan.json"), []byte(body), 0o644)
			_, ok, err := s.Get("wan")
			if ok || err == nil || !strings.Contains(err.Error(), "remove "+filepath.Join(s.Dir, "wan.json")) {
				t.Errorf("Get: ok %v, err %v; want an error that names the file to remove", ok, err)
			}
			if _, err := s.All(); err == nil {
				t.Error("All read past a bad record")
			}
		})
	}
}

// The zero Store keeps nothing and fails nothing.
func TestZeroStore(t *testing.T) {
	var s Store
	if err := s.Put(Record{Device: "wan"}); err != nil {
		t.Error(err)
	}
	if _, ok, err := s.Get("wan"); ok || err != nil {
		t.Errorf("Get: %v %v", ok, err)
	}
	if rs, err := s.All(); rs != nil || err != nil {
		t.Errorf("All: %v %v", rs, err)
	}
}

func TestDir(t *testing.T) {
	for root, want := range map[string]string{"": "/var/run/sqmkit/applied", "/": "/var/run/sqmkit/applied", "/tmp/r": "/tmp/r/var/run/sqmkit/applied"} {
		if got := Dir(root); got != want {
			t.Errorf("Dir(%q) = %q, want %q", root, got, want)
		}
	}
}

// TestAllSkipsBadRecord: a record that cannot be read (corrupt, or of
// another device) is reported and skipped; the others are returned.
func TestAllSkipsBadRecord(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.Put(Record{Device: "wan", Section: "wan"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.Dir, "eth9.json"), []byte("{not json"), 0o644)
	recs, err := s.All()
	if err == nil || !strings.Contains(err.Error(), "eth9") {
		t.Errorf("error %v, want one naming eth9", err)
	}
	if len(recs) != 1 || recs[0].Device != "wan" {
		t.Errorf("records %+v, want wan's", recs)
	}
}
