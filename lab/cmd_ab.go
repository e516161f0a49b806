package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

const abUsage = `  ab     --profile NAME|PATH --backend B --rates DOWN/UP [--arms step,confirm] [--rounds 8]  the shaper held at
         one pair of rates, the bidirectional phase measured by each arm in turn, round after round (client,
         router: the grade's 30 s phase forwarded or the router's own; step, long, confirm: tune's), with the
         router's and the modem's queues sampled
`

func runAB(repo string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab ab", flag.ExitOnError)
	prof := fs.String("profile", "cable", "profile name (lab/profiles/NAME.conf) or path to a profile file")
	backend := fs.String("backend", "cake", "one of sqmkit's backends: "+strings.Join(sqmkitBackends, ", "))
	rates := fs.String("rates", "", "the shaper's `DOWN/UP` rates in kbit/s, held for the whole run")
	arms := fs.String("arms", "step,confirm", "comma-separated instruments, each a bidirectional phase, run in this order every round: "+armNames())
	sp := abSpec{}
	fs.IntVar(&sp.Rounds, "rounds", 8, "how many times each arm runs")
	out := fs.String("out", "", "results directory (default lab/results/<time>-<profile>)")
	kernel := kernelFlag(fs)
	fs.Parse(args)
	if _, err := fmt.Sscanf(*rates, "%d/%d", &sp.Down, &sp.Up); err != nil {
		fatal(fmt.Errorf("--rates %q: want DOWN/UP in kbit/s, e.g. 38800/7760", *rates))
	}
	sp.Arms = strings.Split(*arms, ",")
	if err := sp.check(); err != nil {
		fatal(err)
	}
	if !slices.Contains(sqmkitBackends, *backend) {
		fatal(fmt.Errorf("--backend %q: want one of %s", *backend, strings.Join(sqmkitBackends, ", ")))
	}
	return execute(repo, "ab", *prof, *out, *kernel, []planRun{{Profile: *prof, Backends: []string{*backend}, Mode: "ab", AB: &sp}}, false)
}
