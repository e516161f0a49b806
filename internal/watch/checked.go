package watch

import (
	"fmt"
	"slices"
	"time"

	"github.com/sqmkit/sqmkit/internal/history"
)

// LineShift is how far the line may move from what the rates were set
// for before the scheduled check says so: past it, the rates either waste
// the new capacity or sit above the line, where the bloat comes back.
const LineShift = 0.15

// letters are the grades, best first.
var letters = []string{"A+", "A", "B", "C", "D", "F"}

// Checked is the verdict of the scheduled check e on queue q's record (its
// grades before e, the rates tune wrote) with configured rates (kbit/s;
// download, upload): a grade a letter or more worse than the last one,
// and a line LineShift or more from the one the rates were set for (the
// tune's measured line; without a tune, the configured rates at 95 % of
// it, sqm's rule) (TestChecked).
func Checked(q *history.Queue, e history.Entry, configured [2]int) []history.Finding {
	var out []history.Finding
	if prev, ok := q.Last(""); ok {
		was, now := slices.Index(letters, prev.Grade), slices.Index(letters, e.Grade)
		if was >= 0 && now > was {
			out = append(out, history.Finding{ID: GradeDrop, Since: e.At, Severity: "warn", Subject: "line",
				Evidence: fmt.Sprintf("the check at %s graded %s (+%.0f ms), the test before it (%s, %s) %s", e.At.Format("2006-01-02 15:04"), e.Grade, e.AddedMs, prev.By, prev.At.Format("2006-01-02"), prev.Grade),
				Fix:      "run tune to find the rates again; if the grade moves from day to day, turn autorate on"})
		}
	}
	ref := [2]int{configured[0] * 100 / 95, configured[1] * 100 / 95}
	basis := "the configured rates at 95 % of it"
	if t := q.Tuned; t != nil && t.LineDown > 0 && t.LineUp > 0 {
		ref, basis = [2]int{t.LineDown, t.LineUp}, "measured by the tune of "+t.At.Format("2006-01-02")
	}
	for d, dir := range []string{"download", "upload"} {
		line := [2]int{e.LineDown, e.LineUp}[d]
		if line <= 0 || ref[d] <= 0 {
			continue
		}
		shift := float64(line)/float64(ref[d]) - 1
		if shift > -LineShift && shift < LineShift {
			continue
		}
		id, fix := LineFaster, "run tune: the shaper holds the "+dir+" under the line's new rate"
		if shift < 0 {
			id, fix = LineSlower, "run tune: the shaper's rate is above the line, where the bloat comes back"
		}
		out = append(out, history.Finding{ID: id + "-" + dir, Since: e.At, Severity: "warn", Subject: dir,
			Evidence: fmt.Sprintf("the %s line measured %d kbit/s on %s, %+.0f %% from the %d kbit/s the rates were set for (%s)", dir, line, e.At.Format("2006-01-02"), 100*shift, ref[d], basis),
			Fix:      fix})
	}
	return out
}

// QuietHours are when a scheduled check may run, local time: from 03:00 to
// 05:00, when a home's line is most often idle.
var QuietHours = [2]int{3, 5}

// due says whether a scheduled check (every "daily" or "weekly") is due at
// now after the last one at last, within the quiet hours (from hours[0]
// to hours[1], local time): at most one a day (TestDue).
func due(every string, last, now time.Time, hours [2]int) bool {
	period := map[string]time.Duration{"daily": 24 * time.Hour, "weekly": 7 * 24 * time.Hour}[every]
	if period == 0 || now.Hour() < hours[0] || now.Hour() >= hours[1] {
		return false
	}
	// a little under the period: a check that ran late yesterday is due
	// again in today's window
	return last.IsZero() || now.Sub(last) >= period-3*time.Hour
}
