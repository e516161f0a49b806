package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
)

func TestJSONRoundTrip(t *testing.T) {
	for name, spec := range map[string]reporttest.Spec{"bloated": reporttest.Bloated(), "shaped": reporttest.Shaped()} {
		t.Run(name, func(t *testing.T) {
			want := reporttest.Result(spec)
			want.Notes = []string{"path looks asymmetric"}
			want.RPM = &bbresult.RPM{URL: "https://bb.example.net/config", RPM: 1234, DownloadMbps: 90, UploadMbps: 17}
			var buf bytes.Buffer
			if err := WriteJSON(&buf, want); err != nil {
				t.Fatal(err)
			}
			got, err := ReadJSON(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the result:\n got %+v\nwant %+v", got.Grades, want.Grades)
			}
		})
	}
}

func TestReadJSONFixtures(t *testing.T) {
	for _, c := range []struct {
		file    string
		wantErr string // "" = must load
	}{
		{"minimal.json", ""},
		{"version2.json", "schema_version 2"},
		{"flent.json", "not a sqmkit result"},
		{"othertool.json", "not a sqmkit result"},
		{"badtype.json", `field "idle_rtt_ms"`},
		{"text.txt", "not a sqmkit result"},
	} {
		t.Run(c.file, func(t *testing.T) {
			r, err := ReadJSON(reporttest.Open(t, "testdata/"+c.file))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Spot-check fields from each level of the schema.
			if r.Family != "ipv4" || r.IdleRTT != 12.5 || len(r.Phases) != 2 ||
				r.Phases[1].InFlow.Median != 70 || r.Phases[1].LostDown != 6 ||
				r.Grades.Percentile != "C" || r.Samples.Probes[1].Lost != "down" ||
				r.Samples.InFlow[0].Dir != "down" || len(r.Notes) != 1 {
				t.Errorf("fields not decoded as written: %+v", r)
			}
		})
	}
}
