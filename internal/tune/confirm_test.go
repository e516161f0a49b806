package tune

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/search"
)

// doctor returns a confirming test whose phase k holds every probe of its
// steady part at add ms over the idle median (its one-way share on the
// download, or the upload's for Upload)
// in its first n runs, and counts the runs. Its phases are long enough to
// have a steady part (the session's steps are shorter than Transient).
func doctor(k search.Kind, add float64, n int, runs *int) func(context.Context, bbclient.Config) (*bbresult.Result, error) {
	return func(ctx context.Context, c bbclient.Config) (*bbresult.Result, error) {
		for _, d := range []*time.Duration{&c.Download, &c.Upload, &c.Bidir} {
			if *d > 0 { // a phase measured again alone keeps its one phase
				*d = 2500 * time.Millisecond
			}
		}
		res, err := bbclient.Run(ctx, c)
		*runs++
		if err != nil || *runs > n {
			return res, err
		}
		var idle []float64
		for _, ph := range res.Phases {
			for _, p := range res.Samples.Probes {
				if ph.Name == bbresult.PhaseIdleBefore && p.Lost == "" && p.T >= ph.Start && p.T < ph.End {
					idle = append(idle, p.RTT)
				}
			}
		}
		slices.Sort(idle)
		for i := range res.Phases {
			ph := &res.Phases[i]
			if ph.Name != string(k) || len(idle) == 0 {
				continue
			}
			if k == search.Upload {
				ph.AddedUp += add
			} else {
				ph.AddedDown += add
			}
			for j := range res.Samples.Probes {
				if p := &res.Samples.Probes[j]; p.Lost == "" && p.T >= ph.Start+search.Transient && p.T < ph.End {
					p.RTT = idle[len(idle)/2] + add
				}
			}
		}
		return res, nil
	}
}

// A confirming test's phase that misses under twice its bars is measured
// again and judged on the mean of the two; a mean that misses by a little
// (less than half a bar over, one step to the search) lowers the direction
// that queued by 2 % and confirms once more; a second miss, or a clear
// first one, writes nothing and restores the shaper.
func TestSessionConfirmMiss(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about 15 s of loopback tests per case")
	}
	for _, c := range []struct {
		name        string
		k           search.Kind
		add         float64 // ms in the confirm's steady phase (A+: median 5)
		misses      int     // confirms (and phases measured again) doctored
		written     bool
		lowDn, lowU bool
		runs        int
		again       bool // the first confirm's missed phase measured again (Outcome.Again)
		// budget: room for one confirming test only; the lowered rates
		// are written unconfirmed
		budget bool
	}{
		{"bidirectional by a little", search.Bidir, 5.5, 2, true, true, false, 3, true, false},
		// +7 ms (1.4 bars) is a one-step miss to the search: one step here too
		{"bidirectional by under half a bar", search.Bidir, 7, 2, true, true, false, 3, true, false},
		// the phase measured again reads the loopback's ~0: the mean meets
		{"bidirectional once", search.Bidir, 7, 1, true, false, false, 2, true, false},
		{"upload by a little", search.Upload, 5.5, 2, true, false, true, 3, true, false},
		{"by a little twice", search.Bidir, 5.5, 3, false, false, false, 3, true, false},
		{"clearly", search.Download, 20, 1, false, false, false, 1, false, false},
		{"by a little, no budget for another", search.Upload, 5.5, 2, true, false, true, 2, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, k, _ := session(t, true)
			if c.budget {
				l := s.Live
				s.Budget = l.fixedCost() + search.MinSteps*l.phase(l.Step) + l.phase(l.Step)/2
			}
			runs := 0
			s.confirmTest = doctor(c.k, c.add, c.misses, &runs)
			var searched [2]int
			s.Log = func(l string) {
				t.Log(l)
				if strings.HasPrefix(l, "confirming ") && searched[0] == 0 {
					fmt.Sscanf(l, "confirming %d/%d", &searched[0], &searched[1])
				}
			}
			o, err := s.Run(context.Background())
			if runs != c.runs {
				t.Errorf("%d confirming tests, want %d", runs, c.runs)
			}
			if again := o.Again != nil && len(o.Again.Phases) > 0; again != c.again {
				t.Errorf("the missed phase measured again: %v, want %v", again, c.again)
			} else if again {
				if _, err := search.PhaseOf(o.Again, c.k); err != nil {
					t.Errorf("measured again: %v", err)
				}
			}
			if !c.written {
				if err == nil || !strings.Contains(err.Error(), "nothing written") || o.Written {
					t.Fatalf("written %v, err %v; want nothing written", o.Written, err)
				}
				if !atRates(t, s, k, 20000, 10000) {
					t.Error("the shaper was not restored to 20000/10000")
				}
				return
			}
			if err != nil || !o.Written {
				t.Fatalf("written %v, err %v", o.Written, err)
			}
			d, u := o.Search.Download.RateKbit, o.Search.Upload.RateKbit
			wantD, wantU := searched[0], searched[1]
			if c.lowDn {
				wantD = int(float64(wantD) * (1 - search.BidirStep))
			}
			if c.lowU {
				wantU = int(float64(wantU) * (1 - search.BidirStep))
			}
			lowered := 0
			if c.lowDn || c.lowU {
				lowered = 1
			}
			if d != wantD || u != wantU || o.Search.ConfirmLowered != lowered {
				t.Errorf("written %d/%d (lowered %d times) after confirming %v; want %d/%d", d, u, o.Search.ConfirmLowered, searched, wantD, wantU)
			}
			if !atRates(t, s, k, d, u) {
				t.Errorf("the kernel is not at the written rates %d/%d", d, u)
			}
			if o.Unconfirmed != c.budget || c.budget && !o.Search.Upload.Has(search.RuleNoRoomToConfirm) {
				t.Errorf("unconfirmed %v, want %v: %s", o.Unconfirmed, c.budget, o.Search.Upload.Why)
			}
			// the last confirming test ran at the written rates, or, with
			// no room for it, at the searched ones above them
			at := config.Rates{Download: d, Upload: u}
			if c.budget {
				at = config.Rates{Download: searched[0], Upload: searched[1]}
			}
			if o.ConfirmedAt != at {
				t.Errorf("confirmed at %+v, want %+v", o.ConfirmedAt, at)
			}
		})
	}
}

// TestSessionConfirmIncomplete: a confirming test without a grade (its
// load never flowed, its probes lost) confirms nothing: nothing is
// written and the shaper goes back to its rates.
func TestSessionConfirmIncomplete(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about 15 s of loopback tests")
	}
	s, k, _ := session(t, true)
	s.confirmTest = func(ctx context.Context, c bbclient.Config) (*bbresult.Result, error) {
		res, err := s.Live.measured(ctx, c)
		if err == nil {
			res.Incomplete = "no grade: the download never carried data"
		}
		return res, err
	}
	o, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "never carried data") || !strings.Contains(err.Error(), "nothing written") || o.Written {
		t.Fatalf("written %v, err %v; want nothing written, the reason named", o.Written, err)
	}
	if !atRates(t, s, k, 20000, 10000) {
		t.Error("the shaper was not restored to 20000/10000")
	}
}
