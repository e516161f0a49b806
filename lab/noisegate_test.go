package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

func TestNoisy(t *testing.T) {
	for _, tc := range []struct {
		st   *noise.Stats
		want bool
	}{
		{nil, false},
		{&noise.Stats{Foreign: maxForeign, Steal: 0.5}, false},
		{&noise.Stats{Foreign: maxForeign + 0.001, P99: 3, Max: 40}, true},
		{&noise.Stats{Foreign: 0.01, Busy: maxBusy, Steal: 0.05}, false},
		{&noise.Stats{Foreign: 0.01, Busy: maxBusy + 0.001}, true},
		{&noise.Stats{Foreign: 0.01, Busy: 0.5, Missing: maxMissing}, false},
		{&noise.Stats{Missing: 1}, true}, // a window with a missing sample is not quiet
	} {
		if got := strict.noisy(tc.st); (got != "") != tc.want {
			t.Errorf("noisy(%+v) = %q, want noisy %v", tc.st, got, tc.want)
		}
	}
}

// keepClean measures noisy phases again, keeps clean ones, recomputes the
// grade from what it kept, and gives up after maxReruns.
func TestKeepClean(t *testing.T) {
	quiet, loud := &noise.Stats{Foreign: 0.01, Steal: 0.08}, &noise.Stats{Foreign: 0.5}
	phase := func(name string, mean float64, n *noise.Stats) accept.Phase {
		return accept.Phase{Name: name, AddedMean: mean, AddedMedian: mean, Noise: n}
	}
	first := func(up *noise.Stats) accept.Measurement {
		return accept.Measurement{Grade: "A", Phases: []accept.Phase{
			phase(accept.Download, 2, quiet), phase(accept.Upload, 40, up), phase(accept.Bidir, 3, quiet)}}
	}
	for _, tc := range []struct {
		name      string
		first     accept.Measurement
		reruns    []*noise.Stats // noise of each re-run of upload
		wantRuns  []string
		wantGrade string
		wantRun   string // the run upload's figures come from
		wantBusy  bool
	}{
		{"quiet", first(quiet), nil, nil, "A", "", false},
		{"one noisy phase, clean again", first(loud), []*noise.Stats{quiet}, []string{"rerun-upload-1"}, "A+", "rerun-upload-1", false},
		{"clean on the last try", first(loud), []*noise.Stats{loud, quiet}, []string{"rerun-upload-1", "rerun-upload-2"}, "A+", "rerun-upload-2", false},
		{"never clean", first(loud), []*noise.Stats{loud, loud}, []string{"rerun-upload-1", "rerun-upload-2"}, "A+", "rerun-upload-2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []string
			m, disc, err := strict.keepClean(tc.first, 7600, func(run, ph, _ string) (accept.Measurement, error) {
				if ph != accept.Upload {
					t.Fatalf("re-ran %s, which was quiet", ph)
				}
				runs = append(runs, run)
				// the re-run measures only upload, and calmly
				return accept.Measurement{Phases: []accept.Phase{phase(accept.Upload, 1, tc.reruns[len(runs)-1])}}, nil
			})
			if !slices.Equal(runs, tc.wantRuns) {
				t.Errorf("runs %v, want %v", runs, tc.wantRuns)
			}
			if len(disc) != len(tc.wantRuns)+map[bool]int{true: 1}[tc.wantBusy] {
				t.Errorf("discarded %+v", disc)
			}
			for _, d := range disc {
				if d.Cause != causeNoise {
					t.Errorf("discarded for %q, want %q", d.Cause, causeNoise)
				}
			}
			var inc *inconclusive
			if errors.As(err, &inc) != tc.wantBusy || (err != nil && !tc.wantBusy) {
				t.Errorf("err %v, want inconclusive %v", err, tc.wantBusy)
			}
			if tc.wantBusy && !strings.Contains(err.Error(), "inconclusive: host busy (no clean upload phase in 3 tries") {
				t.Errorf("message %q", err)
			}
			if m.Grade != tc.wantGrade || m.Phase(accept.Upload).Run != tc.wantRun {
				t.Errorf("grade %s from run %q, want %s from %q", m.Grade, m.Phase(accept.Upload).Run, tc.wantGrade, tc.wantRun)
			}
		})
	}
	if _, _, err := strict.keepClean(first(loud), 7600, func(string, string, string) (accept.Measurement, error) {
		return accept.Measurement{}, errors.New("server gone")
	}); err == nil || !strings.Contains(err.Error(), "server gone") {
		t.Errorf("a failed re-run: err %v", err)
	}
}

// A shaped phase near its bars is measured once more and graded on the
// mean of the two; one far from them, or an unshaped one, is graded as
// measured; a second measurement the host disturbed is discarded.
func TestKeepCleanBorderline(t *testing.T) {
	quiet, loud := &noise.Stats{Foreign: 0.01}, &noise.Stats{Foreign: 0.5}
	ph := func(name string, med, p95 float64, n *noise.Stats) accept.Phase {
		return accept.Phase{Name: name, AddedMean: med, AddedMedian: med, AddedP95: p95, DownMbps: 30, Noise: n}
	}
	for _, tc := range []struct {
		name           string
		downKbit       int
		bidir          accept.Phase
		again          *accept.Phase // the second measurement of bidir; nil: none expected
		wantMed, wantP float64
		wantAgain      string
		wantDiscarded  int
	}{
		// a miss by 1 % of the bar, then a calm phase
		{"borderline miss, calm again", 7600, ph(accept.Bidir, 10.1, 21.2, quiet), ptr(ph(accept.Bidir, 6.1, 14.8, quiet)), 8.1, 18, "again-bidirectional", 0},
		{"borderline miss, missed again", 7600, ph(accept.Bidir, 10.1, 21.2, quiet), ptr(ph(accept.Bidir, 11.9, 24.8, quiet)), 11, 23, "again-bidirectional", 0},
		{"borderline pass, missed again", 7600, ph(accept.Bidir, 9, 20, quiet), ptr(ph(accept.Bidir, 13, 26, quiet)), 11, 23, "again-bidirectional", 0},
		{"p95 near its bar", 7600, ph(accept.Bidir, 3, 28, quiet), ptr(ph(accept.Bidir, 3, 20, quiet)), 3, 24, "again-bidirectional", 0},
		{"clear pass", 7600, ph(accept.Bidir, 4, 12, quiet), nil, 4, 12, "", 0},
		{"clear miss", 7600, ph(accept.Bidir, 13, 21, quiet), nil, 13, 21, "", 0},
		{"unshaped", 0, ph(accept.Bidir, 10.1, 21.2, quiet), nil, 10.1, 21.2, "", 0},
		{"second measurement noisy", 7600, ph(accept.Bidir, 10.1, 21.2, quiet), ptr(ph(accept.Bidir, 2, 5, loud)), 10.1, 21.2, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := accept.Measurement{Phases: []accept.Phase{ph(accept.Download, 1, 4, quiet), ph(accept.Upload, 1, 3, quiet), tc.bidir}}
			runs := 0
			m, disc, err := strict.keepClean(m, tc.downKbit, func(run, name, why string) (accept.Measurement, error) {
				runs++
				if tc.again == nil || name != accept.Bidir || run != "again-bidirectional" || why != borderline {
					t.Fatalf("measured %s again as %s (%q)", name, run, why)
				}
				return accept.Measurement{Phases: []accept.Phase{*tc.again}}, nil
			})
			b := m.Phase(accept.Bidir)
			if err != nil || len(disc) != tc.wantDiscarded || math.Abs(b.AddedMedian-tc.wantMed) > 1e-9 || math.Abs(b.AddedP95-tc.wantP) > 1e-9 || b.Again != tc.wantAgain {
				t.Errorf("err %v, discarded %+v, bidirectional %+v; want +%v/+%v again %q", err, disc, *b, tc.wantMed, tc.wantP, tc.wantAgain)
			}
			if want := map[bool]int{true: 1}[tc.again != nil]; runs != want {
				t.Errorf("%d second measurements, want %d", runs, want)
			}
			if tc.wantAgain != "" && (b.DownMbps != 30 || b.Run != "") {
				t.Errorf("kept %+v: goodput is the mean of two equal ones, the first run stays the phase's run", *b)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// A phase that missed its bars with one probe flow collided is measured
// again; one that passed with a collision, or missed without one, is
// graded as measured; a collision on every try is graded, not
// inconclusive.
func TestKeepCleanCollision(t *testing.T) {
	quiet := &noise.Stats{Foreign: 0.01}
	ph := func(name string, med float64, coll string) accept.Phase {
		return accept.Phase{Name: name, AddedMean: med, AddedMedian: med, AddedP95: 2 * med, Noise: quiet, Collision: coll}
	}
	const hit = "probe flow 3 of 4 at +6.1 ms"
	for _, tc := range []struct {
		name     string
		down     accept.Phase
		reruns   []accept.Phase
		wantRuns int
		wantMed  float64
	}{
		{"missed with a collision, clean again", ph(accept.Download, 7.1, hit), []accept.Phase{ph(accept.Download, 0.8, "")}, 1, 0.8},
		{"passed with a collision", ph(accept.Download, 1.5, hit), nil, 0, 1.5},
		{"missed without a collision", ph(accept.Download, 7.1, ""), nil, 0, 7.1},
		{"collided every try", ph(accept.Download, 7.1, hit), []accept.Phase{ph(accept.Download, 7.3, hit), ph(accept.Download, 7.2, hit)}, 2, 7.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := accept.Measurement{Phases: []accept.Phase{tc.down, ph(accept.Upload, 1, ""), ph(accept.Bidir, 3, "")}}
			runs := 0
			m, disc, err := strict.keepClean(m, 7600, func(run, name, why string) (accept.Measurement, error) {
				if name != accept.Download || why == "" {
					t.Fatalf("re-ran %s (%q)", name, why)
				}
				runs++
				return accept.Measurement{Phases: []accept.Phase{tc.reruns[runs-1]}}, nil
			})
			if err != nil || runs != tc.wantRuns || len(disc) != tc.wantRuns || m.Phase(accept.Download).AddedMedian != tc.wantMed {
				t.Errorf("err %v, %d runs, discarded %+v, download median %v; want %d runs, %v", err, runs, disc, m.Phase(accept.Download).AddedMedian, tc.wantRuns, tc.wantMed)
			}
			for _, d := range disc {
				if d.Cause != causeCollision || !strings.Contains(d.Why, "collided") {
					t.Errorf("discarded for %s: %q", d.Cause, d.Why)
				}
			}
		})
	}
}

// A shaped phase that missed a bar while the guest had no headroom (its
// vCPUs runnable over maxRunnable) is measured again; one that passed, one
// that missed with headroom, and the bare link are graded as measured;
// misses without headroom on every try make the scenario inconclusive, or
// unproven when only the goodput missed, above minStarvedGoodput.
func TestKeepCleanStarved(t *testing.T) {
	const shaper = 28500
	roomy, starved := &noise.Stats{Foreign: 0.02, Busy: 0.68, Steal: 0.106}, &noise.Stats{Foreign: 0.018, Busy: 0.75, Steal: 0.121}
	down := func(mbps float64, n *noise.Stats) accept.Phase {
		return accept.Phase{Name: accept.Download, AddedMedian: 1.2, AddedP95: 4.5, DownMbps: mbps, Noise: n}
	}
	calm := func(name string) accept.Phase {
		return accept.Phase{Name: name, AddedMedian: 1, AddedP95: 3, DownMbps: 26, Noise: roomy}
	}
	for _, tc := range []struct {
		name     string
		downKbit int
		first    accept.Phase
		reruns   []accept.Phase
		wantMbps float64
		wantBusy bool
		unproven string // in the download's GoodputUnproven
	}{
		{"slow without headroom, then with it", shaper, down(21.8, starved), []accept.Phase{down(26.2, roomy)}, 26.2, false, ""},
		{"no headroom on the first rerun either", shaper, down(21.8, starved), []accept.Phase{down(22.0, starved), down(26.1, roomy)}, 26.1, false, ""},
		{"passed without headroom", shaper, down(25.5, starved), nil, 25.5, false, ""},
		{"slow with headroom: graded", shaper, down(21.8, roomy), nil, 21.8, false, ""},
		{"bare link", 0, down(21.8, starved), nil, 21.8, false, ""},
		// its latency met on each: kept as last measured, its goodput unproven
		{"no headroom on any try", shaper, down(21.8, starved), []accept.Phase{down(21.5, starved), down(22.3, starved)}, 22.3, false,
			"no headroom on each of 3 tries (runnable over 80%); they carried 21.5-22.3 Mbit/s, 75-78% of 28500 kbit/s"},
		{"no headroom on any try, under 70 % once", shaper, down(21.8, starved), []accept.Phase{down(19.9, starved), down(22.3, starved)}, 22.3, true, ""},
		{"no headroom on any try, latency missed once", shaper, down(21.8, starved),
			[]accept.Phase{{Name: accept.Download, AddedMedian: 5.5, AddedP95: 9, DownMbps: 22, Noise: starved}, down(22.3, starved)}, 22.3, true, ""},
		// a latency miss counts as a goodput one does
		{"latency miss without headroom", shaper, accept.Phase{Name: accept.Download, AddedMedian: 7.5, AddedP95: 14, DownMbps: 26, Noise: starved},
			[]accept.Phase{down(26.2, roomy)}, 26.2, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := accept.Measurement{Phases: []accept.Phase{tc.first, calm(accept.Upload), calm(accept.Bidir)}}
			runs := 0
			m, disc, err := strict.keepClean(m, tc.downKbit, func(run, name, why string) (accept.Measurement, error) {
				if name != accept.Download || !strings.Contains(why, "no headroom") {
					t.Fatalf("re-ran %s (%q)", name, why)
				}
				runs++
				return accept.Measurement{Phases: []accept.Phase{tc.reruns[runs-1]}}, nil
			})
			// an inconclusive phase's last try is discarded too; an unproven one's is kept
			if runs != len(tc.reruns) || len(disc) != runs+map[bool]int{true: 1}[tc.wantBusy] {
				t.Errorf("%d runs, discarded %+v; want %d runs", runs, disc, len(tc.reruns))
			}
			for _, d := range disc {
				if d.Cause != causeStarved || !strings.Contains(d.Why, "runnable 87%") || !strings.Contains(d.Why, "missed: download ") {
					t.Errorf("discarded for %s: %q", d.Cause, d.Why)
				}
			}
			var inc *inconclusive
			if errors.As(err, &inc) != tc.wantBusy || (err != nil && !tc.wantBusy) {
				t.Errorf("err %v, want inconclusive %v", err, tc.wantBusy)
			}
			// the host was not busy: the verdict says whose the miss was
			if tc.wantBusy && !strings.HasPrefix(err.Error(), "inconclusive: guest short of CPU (no clean download phase in 3 tries") {
				t.Errorf("message %q", err)
			}
			d := m.Phase(accept.Download)
			if d.DownMbps != tc.wantMbps {
				t.Errorf("download graded at %v Mbit/s, want %v", d.DownMbps, tc.wantMbps)
			}
			if tc.unproven == "" && d.GoodputUnproven != "" || !strings.Contains(d.GoodputUnproven, tc.unproven) {
				t.Errorf("goodput unproven %q, want %q", d.GoodputUnproven, tc.unproven)
			}
			// the goodput check follows: an unproven one makes the scenario unproven
			want := "pass"
			switch {
			case tc.unproven != "":
				want = "unproven"
			case d.DownMbps < accept.MinGoodputShare*shaper/1000:
				want = "fail"
			}
			if got := status(accept.Shaped(m, shaper)); !tc.wantBusy && got != want {
				t.Errorf("status %s, want %s", got, want)
			}
		})
	}
}

// TestKeepCleanStarvedVerdict: the inconclusive verdict names the cause
// of the phases that stayed unclean, not of a phase that was re-measured
// once for host noise and then graded.
func TestKeepCleanStarvedVerdict(t *testing.T) {
	starved := &noise.Stats{Foreign: 0.018, Busy: 0.75, Steal: 0.121}
	loud, roomy := &noise.Stats{Foreign: 0.2, Busy: 0.5, Steal: 0.05}, &noise.Stats{Foreign: 0.02, Busy: 0.6, Steal: 0.05}
	// a latency miss too: a goodput-only one would be unproven, not inconclusive
	slow := accept.Phase{Name: accept.Download, AddedMedian: 7.2, AddedP95: 16.5, DownMbps: 21.8, Noise: starved}
	up := func(n *noise.Stats) accept.Phase {
		return accept.Phase{Name: accept.Upload, AddedMedian: 1, AddedP95: 3, UpMbps: 9, Noise: n}
	}
	for _, tc := range []struct {
		name string
		up   []accept.Phase // the upload's first measurement and its reruns
		want string
	}{
		{"the upload clean at once", []accept.Phase{up(roomy)}, "inconclusive: guest short of CPU"},
		{"the upload noisy once, then clean", []accept.Phase{up(loud), up(roomy)}, "inconclusive: guest short of CPU"},
		{"the upload noisy on every try too", []accept.Phase{up(loud), up(loud), up(loud)}, "inconclusive: host busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := accept.Measurement{Phases: []accept.Phase{slow, tc.up[0]}}
			n := map[string]int{}
			_, _, err := strict.keepClean(m, 28500, func(run, name, why string) (accept.Measurement, error) {
				n[name]++
				if name == accept.Upload {
					return accept.Measurement{Phases: []accept.Phase{tc.up[n[name]]}}, nil
				}
				return accept.Measurement{Phases: []accept.Phase{slow}}, nil
			})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v, want %q…", err, tc.want)
			}
		})
	}
}

// A stretch the lab cannot re-run phase by phase (tune, its sweep, the
// hotplug storm) is judged as one window: a noisy one is recorded and
// makes the scenario inconclusive, whatever the stretch returned.
func TestJudgeStretch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    noise.Stats
		noisy bool
	}{
		{"quiet", noise.Stats{Foreign: 0.02, Busy: 0.6}, false},
		{"busy loops beside", noise.Stats{Foreign: 0.45, Busy: 0.6}, true},
		{"saturated vCPUs", noise.Stats{Foreign: 0.02, Busy: 0.97}, true},
		{"unseen by the sampler", noise.Stats{Foreign: 0.02, Busy: 0.6, Missing: 0.2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			err := strict.judgeStretch("tune", tc.st, &r)
			var inc *inconclusive
			if errors.As(err, &inc) != tc.noisy || (err != nil) != tc.noisy || (len(r.Discarded) == 1) != tc.noisy {
				t.Fatalf("err %v, discarded %+v; want noisy %v", err, r.Discarded, tc.noisy)
			}
			if tc.noisy && (r.Discarded[0].Phase != "tune" || r.Discarded[0].Why == "" || !strings.Contains(err.Error(), "no clean tune phase in 1 tries")) {
				t.Errorf("discarded %+v, err %v", r.Discarded[0], err)
			}
		})
	}
}

// cleanRun keeps the first quiet measurement, drops the noisy ones before
// it, gives up after maxReruns, and passes a failure through.
func TestCleanRun(t *testing.T) {
	quiet, loud := &noise.Stats{Foreign: 0.01, Busy: 0.7}, &noise.Stats{Foreign: 0.01, Busy: 0.99}
	for _, tc := range []struct {
		name              string
		seq               []*noise.Stats
		fail              bool
		measured, dropped int
		inconclusive      bool
	}{
		{"quiet at once", []*noise.Stats{quiet}, false, 1, 0, false},
		{"no gauge", []*noise.Stats{nil}, false, 1, 0, false},
		{"quiet on the last try", []*noise.Stats{loud, loud, quiet}, false, 3, 2, false},
		{"never quiet", []*noise.Stats{loud, loud, loud, quiet}, false, 1 + maxReruns, 1 + maxReruns, true},
		{"a failed run", []*noise.Stats{loud, quiet}, true, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			measured, dropped := 0, 0
			err := strict.cleanRun("trace", func() (*noise.Stats, error) {
				measured++
				if tc.fail {
					return nil, errors.New("sqmkit test failed")
				}
				return tc.seq[measured-1], nil
			}, func(try int, st noise.Stats, why string) {
				dropped++
				if try != dropped || st.Busy != loud.Busy || !strings.Contains(why, "vCPUs ran 99%") {
					t.Errorf("drop(%d, %+v, %q)", try, st, why)
				}
			})
			var inc *inconclusive
			if measured != tc.measured || dropped != tc.dropped || errors.As(err, &inc) != tc.inconclusive || (tc.fail != (err != nil && !tc.inconclusive)) {
				t.Errorf("measured %d dropped %d err %v; want %d %d inconclusive %v", measured, dropped, err, tc.measured, tc.dropped, tc.inconclusive)
			}
		})
	}
	if msg := (&inconclusive{phases: []string{"storm"}, tries: 1}).Error(); !strings.Contains(msg, "no clean storm phase in 1 tries") {
		t.Errorf("a one-try scenario's inconclusive message: %s", msg)
	}
}

// An inconclusive scenario is run once more after the others, alone, with
// a fresh wait budget; its first pass's files and discarded measurements
// stay on record. Trace runs and scenarios that ended otherwise are left.
func TestSecondPass(t *testing.T) {
	out := t.TempDir()
	runs, byRun, busy := secondPassRuns(out)
	kernel := result{Profile: "kernel", Backend: "TestLab", Status: "pass"}
	var asked []planRun
	var said []string
	g := &guest{say: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }, settler: &settler{left: 0}}
	again := func(pr planRun) ([]result, error) {
		asked = append(asked, pr)
		var got []result
		for _, b := range pr.Backends {
			if g.settler.left != settleBudget {
				t.Errorf("second pass of %s with %v of the wait budget left; want a fresh %v", b, g.settler.left, settleBudget)
			}
			name := b
			if pr.Mode == "hotplug" {
				name = "hotplug-" + b
			}
			d := filepath.Join(out, "vdsl", name)
			if _, err := os.Stat(filepath.Join(d, "test.json")); err == nil {
				t.Errorf("%s: the first pass's files are still where the second writes", d)
			}
			os.MkdirAll(d, 0o755)
			got = append(got, result{Profile: "vdsl", Backend: b, Status: "pass", Dir: d,
				Discarded: []discarded{{Phase: "download", Run: "again-download", Cause: causeNoise}}})
		}
		return got, nil
	}
	if !g.secondPass(runs, byRun, again) {
		t.Fatal("secondPass ran nothing")
	}
	rs := []result{kernel} // as runGuest's summary lists them
	for _, got := range byRun {
		rs = append(rs, got...)
	}
	want := []planRun{
		{Profile: "/p/vdsl.conf", Backends: []string{"nss"}},
		{Profile: "/p/vdsl.conf", Backends: []string{"cake"}, Mode: "hotplug"},
	}
	if !reflect.DeepEqual(asked, want) {
		t.Fatalf("ran %+v; want %+v", asked, want)
	}
	nss := rs[3]
	if nss.Status != "pass" || nss.Backend != "nss" || nss.FirstTry != busy {
		t.Errorf("vdsl/nss after the second pass: %+v", nss)
	}
	if len(nss.Discarded) != 2 || nss.Discarded[0].Run != "nss.busy/test" || nss.Discarded[1].Run != "again-download" {
		t.Errorf("discarded %+v; want the first pass's (under nss.busy/) then the second's", nss.Discarded)
	}
	if b, err := os.ReadFile(filepath.Join(out, "vdsl/nss.busy/test.json")); err != nil || string(b) != "first" {
		t.Errorf("the first pass's files: %q %v", b, err)
	}
	var saved result
	if b, err := os.ReadFile(filepath.Join(out, "vdsl/nss/result.json")); err != nil || json.Unmarshal(b, &saved) != nil || saved.FirstTry != busy {
		t.Errorf("result.json of the second pass: %+v %v", saved, err)
	}
	if rs[4].Status != "pass" || rs[4].Backend != "cake" {
		t.Errorf("hotplug after the second pass: %+v", rs[4])
	}
	for _, i := range []int{0, 1, 2, 5, 6} {
		if rs[i].FirstTry != "" {
			t.Errorf("%s/%s ran again: %+v", rs[i].Profile, rs[i].Backend, rs[i])
		}
	}
	if rs[5].Status != "inconclusive" {
		t.Errorf("the trace run changed: %+v", rs[5])
	}
	if w := "vdsl/nss: " + busy + "; running it again after the others (its first files in nss.busy)"; !slices.Contains(said, w) {
		t.Errorf("said %q; want %q", said, w)
	}
	if !strings.Contains(summaryLine(&nss), "second pass") {
		t.Errorf("the line does not say it was a second pass: %s", summaryLine(&nss))
	}

	// nothing inconclusive: nothing runs
	asked = nil
	if g.secondPass(runs[:1], byRun[:1], again) || asked != nil {
		t.Errorf("ran %+v with nothing inconclusive", asked)
	}
}

// secondPassRuns is a run's plan and first pass with files under out:
// vdsl's nss and hotplug and a trace run inconclusive (busy), the rest
// ended otherwise.
func secondPassRuns(out string) (runs []planRun, byRun [][]result, busy string) {
	dir := func(s string) string {
		d := filepath.Join(out, s)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "test.json"), []byte("first"), 0o644)
		return d
	}
	busy = "inconclusive: host busy (no clean upload phase in 3 tries; see discarded in result.json)"
	runs = []planRun{
		{Profile: "/p/vdsl.conf", Backends: []string{"cake", "fq_codel", "nss"}},
		{Profile: "/p/vdsl.conf", Backends: []string{"cake"}, Mode: "hotplug"},
		{Profile: "/p/cable.conf", Backends: []string{"cake"}, Mode: "trace"},
		{Profile: "/p/cable.conf", Backends: []string{"fq_codel"}},
	}
	byRun = [][]result{{
		{Profile: "vdsl", Backend: "cake", Status: "pass", Dir: dir("vdsl/cake")},
		{Profile: "vdsl", Backend: "fq_codel", Status: "fail", Dir: dir("vdsl/fq_codel")},
		{Profile: "vdsl", Backend: "nss", Status: "inconclusive", Error: busy, Dir: dir("vdsl/nss"),
			Discarded: []discarded{{Phase: "upload", Run: "test", Cause: causeNoise}}},
	}, {
		{Profile: "vdsl", Backend: "hotplug:cake", Status: "inconclusive", Error: busy, Dir: dir("vdsl/hotplug-cake")},
	}, {
		{Profile: "cable-lte", Backend: "cake", Status: "inconclusive", Error: busy, Dir: dir("cable-lte/cake")},
	}, {
		{Profile: "cable", Backend: "fq_codel", Status: "pass", Dir: dir("cable/fq_codel")},
	}}
	return runs, byRun, busy
}

// A second pass of a tune keeps the first pass's sweep where it was
// measured clean, and sweeps again where it was not.
func TestSecondPassKeepsSweep(t *testing.T) {
	out := t.TempDir()
	sw := &swept{From: 70, To: 100, Stop: 3, BestDown: 6960, BestUp: 790}
	runs := []planRun{{Profile: "/p/adsl-atm.conf", Backends: []string{"cake", "nss"}, Mode: "tune", Sweep: &sweepSpec{From: 70, To: 100, Stop: 3}}}
	byRun := [][]result{{
		{Profile: "adsl-atm", Backend: "cake", Status: "inconclusive", Error: "inconclusive: host busy", Dir: filepath.Join(out, "cake"), Sweep: sw},
		{Profile: "adsl-atm", Backend: "nss", Status: "inconclusive", Error: "inconclusive: host busy", Dir: filepath.Join(out, "nss")},
	}}
	var asked []planRun
	var said []string
	g := &guest{say: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	g.secondPass(runs, byRun, func(pr planRun) ([]result, error) {
		asked = append(asked, pr)
		var got []result
		for _, b := range pr.Backends {
			got = append(got, result{Profile: "adsl-atm", Backend: b, Status: "pass", Dir: filepath.Join(out, b)})
		}
		return got, nil
	})
	if len(asked) != 1 || len(asked[0].Kept) != 1 || asked[0].Kept["cake"] != sw || asked[0].Sweep == nil {
		t.Fatalf("ran %+v; want cake's sweep kept, nss's spec to sweep again", asked)
	}
	if w := "adsl-atm/cake: the second pass keeps the first pass's sweep (best 6960/790, its files in cake.busy)"; !slices.Contains(said, w) {
		t.Errorf("said %q; want %q", said, w)
	}
}

// TestDemoGate: on a host whose own steady load (a VM's steal) is above
// the strict gate's limit, the demo judges against that baseline plus the
// strict margin: a phase at the baseline is graded, one well above it is
// measured once more and then left inconclusive; a quiet host keeps the
// strict limit, and no baseline lifts the limit past maxBaseline's.
func TestDemoGate(t *testing.T) {
	steady := &noise.Stats{Foreign: 0.18, Busy: 0.5}
	spike := &noise.Stats{Foreign: 0.45, Busy: 0.5}
	if strict.noisy(steady) == "" {
		t.Fatal("the strict gate takes an 18 % steal for a quiet host")
	}
	g := demoGate(0.16)
	if why := g.noisy(steady); why != "" {
		t.Errorf("the demo gate on a 16 %% baseline discards an 18 %% phase: %s", why)
	}
	if why := g.noisy(spike); !strings.Contains(why, "limit 26%") {
		t.Errorf("a 45 %% phase on a 16 %% baseline: %q", why)
	}
	if got := demoGate(0.01).foreign; got != maxForeign+0.01 {
		t.Errorf("a quiet host's demo limit %.2f", got)
	}
	if got := demoGate(0.9).foreign; got != maxForeign+maxBaseline {
		t.Errorf("a saturated host's demo limit %.2f, want at most %.2f", got, maxForeign+maxBaseline)
	}
	m := accept.Measurement{Phases: []accept.Phase{{Name: accept.Download, AddedMean: 2, Noise: steady}, {Name: accept.Upload, AddedMean: 2, Noise: spike}}}
	tries := 0
	_, _, err := g.keepClean(m, 7600, func(run, ph, _ string) (accept.Measurement, error) {
		tries++
		return accept.Measurement{Phases: []accept.Phase{{Name: ph, AddedMean: 2, Noise: spike}}}, nil
	})
	var inc *inconclusive
	if !errors.As(err, &inc) || tries != demoReruns || !strings.Contains(err.Error(), "no clean upload phase in 2 tries") {
		t.Errorf("a phase noisy on every try: %v after %d measurements again", err, tries)
	}
}
