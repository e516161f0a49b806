package watch

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/history"
)

var t0 = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

// minutes are n minutes from t0 with the load and the added delay f gives.
func minutes(n int, f func(i int) (down, up, added float64)) []Minute {
	var ms []Minute
	for i := range n {
		d, u, a := f(i)
		ms = append(ms, Minute{At: t0.Add(time.Duration(i) * time.Minute), Load: [2]float64{d, u}, AddedMs: a})
	}
	return ms
}

// TestJudge: a shaper that is full with flat delay is at work, never a
// finding, however long; a download that adds delay while the shaper is
// not full is the bloat back, once enough minutes say so; a direction
// with the other loaded is not attributed, one beside a download's ACKs
// is; too few loaded minutes, or
// bloat in only a few of them, are no evidence.
func TestJudge(t *testing.T) {
	p := DefaultParams
	for _, tc := range []struct {
		name string
		ms   []Minute
		want []string
	}{
		{"full and flat all evening", minutes(360, func(int) (float64, float64, float64) { return 0.97, 0.02, 2 }), nil},
		{"idle", minutes(360, func(int) (float64, float64, float64) { return 0.01, 0.01, math.NaN() }), nil},
		{"the line slower: the download bloats at 60 %", minutes(360, func(i int) (float64, float64, float64) {
			if i%4 == 0 {
				return 0.6, 0.03, 80
			}
			return 0.02, 0.01, 1
		}), []string{"bloat-back-download"}},
		{"the upload's modem queue grew", minutes(120, func(int) (float64, float64, float64) { return 0.02, 0.5, 40 }), []string{"bloat-back-upload"}},
		{"a download's ACKs take a fifth of a 10:1 upload", minutes(120, func(int) (float64, float64, float64) { return 0.6, 0.22, 40 }), []string{"bloat-back-download"}},
		{"both loaded: not attributed", minutes(120, func(int) (float64, float64, float64) { return 0.6, 0.6, 80 }), nil},
		{"too few loaded minutes", minutes(20, func(int) (float64, float64, float64) { return 0.6, 0.02, 80 }), nil},
		{"bloat in a few loaded minutes", minutes(100, func(i int) (float64, float64, float64) {
			if i%10 == 0 {
				return 0.6, 0.02, 80
			}
			return 0.6, 0.02, 3
		}), nil},
		{"outside the window", append(minutes(60, func(int) (float64, float64, float64) { return 0.6, 0.02, 80 }),
			Minute{At: t0.Add(8 * time.Hour), Load: [2]float64{0.01, 0.01}, AddedMs: 1}), nil},
	} {
		now := tc.ms[len(tc.ms)-1].At
		got := Judge(p, tc.ms, now, nil)
		var ids []string
		for _, f := range got {
			ids = append(ids, f.ID)
			if f.Evidence == "" || !strings.Contains(f.Fix, "tune") || f.Since != now {
				t.Errorf("%s: finding %+v", tc.name, f)
			}
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: findings %v, want %v", tc.name, ids, tc.want)
		}
	}
	// a finding keeps the time it was first made
	ms := minutes(60, func(int) (float64, float64, float64) { return 0.6, 0.02, 80 })
	first := t0.Add(-time.Hour)
	if got := Judge(p, ms, ms[59].At, map[string]time.Time{"bloat-back-download": first}); len(got) != 1 || got[0].Since != first {
		t.Errorf("since: %+v", got)
	}
}

// TestChecked: a grade lost, and a line 15 % or more from the tune's
// (or, without a tune, from the configured rates at 95 % of it) are
// findings; a line within it is none.
func TestChecked(t *testing.T) {
	q := &history.Queue{Grades: []history.Entry{{At: t0, By: "tune", Grade: "A+"}},
		Tuned: &history.Tuned{At: t0, Down: 38000, Up: 7600, LineDown: 40000, LineUp: 8000}}
	ids := func(fs []history.Finding) string {
		var s []string
		for _, f := range fs {
			s = append(s, f.ID)
		}
		return strings.Join(s, ",")
	}
	at := t0.Add(7 * 24 * time.Hour)
	for _, tc := range []struct {
		name string
		e    history.Entry
		q    *history.Queue
		want string
	}{
		{"as tuned", history.Entry{At: at, Grade: "A+", LineDown: 41000, LineUp: 7900}, q, ""},
		{"the line 50 % faster down", history.Entry{At: at, Grade: "A+", LineDown: 60000, LineUp: 8000}, q, "line-faster-download"},
		{"30 % slower, a grade lost", history.Entry{At: at, Grade: "C", LineDown: 28000, LineUp: 8000}, q, "grade-drop,line-slower-download"},
		{"no tune: the configured rates", history.Entry{At: at, Grade: "A+", LineDown: 30000, LineUp: 8000}, &history.Queue{}, "line-slower-download"},
	} {
		if got := ids(Checked(tc.q, tc.e, [2]int{38000, 7600})); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDue: a check runs in the quiet hours, daily or weekly, never twice
// in a day.
func TestDue(t *testing.T) {
	night := time.Date(2026, 12, 2, 3, 30, 0, 0, time.Local)
	for _, tc := range []struct {
		every     string
		last, now time.Time
		want      bool
	}{
		{"daily", time.Time{}, night, true},
		{"daily", night.Add(-24 * time.Hour), night, true},
		{"daily", night.Add(-time.Hour), night, false},
		{"daily", time.Time{}, night.Add(3 * time.Hour), false},
		{"weekly", night.Add(-24 * time.Hour), night, false},
		{"weekly", night.Add(-7 * 24 * time.Hour), night, true},
		{"", time.Time{}, night, false},
	} {
		if got := due(tc.every, tc.last, tc.now, QuietHours); got != tc.want {
			t.Errorf("%s last %v now %v: %v, want %v", tc.every, tc.last, tc.now, got, tc.want)
		}
	}
}
