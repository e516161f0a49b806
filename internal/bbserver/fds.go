package bbserver

import (
	"fmt"
	"syscall"

	"github.com/sqmkit/sqmkit/internal/connlimit"
)

// fdReserve are the descriptors kept for what is not a test: listeners, the
// UDP socket, logs, the RPM server's own listener.
const fdReserve = 64

// RaiseFDLimit lifts the soft limit on open files to the hard one (Go's
// runtime does the same at start on Linux; a server says so in its log) and
// returns both.
func RaiseFDLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return 0, r.Max, err
		}
	}
	return r.Cur, r.Max, nil
}

func fdLimit() int {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil || r.Cur > 1<<20 {
		return 1 << 20
	}
	return int(r.Cur)
}

// fit sizes the caps so that everything they admit has a descriptor: a
// test holds its control connection and up to twice its streams per
// direction (the next phase opens while the last one closes); unidentified
// connections take what is left, up to maxPending. With a low limit, fewer
// tests run at once, then fewer streams per test; Sizing says what was
// chosen and why.
func (s *Server) fit() {
	budget := max(s.cfg.FDLimit-fdReserve, 8)
	pending := min(maxPending, max(budget/4, 4))
	perTest := func() int { return 1 + 2*2*s.cfg.MaxStreams }
	if tests := (budget - pending) / perTest(); tests < s.cfg.MaxTests {
		s.cfg.MaxTests = max(tests, 1)
	}
	if perTest()*s.cfg.MaxTests > budget-pending {
		s.cfg.MaxStreams = max((budget-pending-1)/4, 1)
	}
	s.pending = &connlimit.Limiter{Total: pending, PerKey: min(pendingPerClient, pending)}
	s.Sizing = fmt.Sprintf("open file limit %d: at most %d tests at once (%d sockets each at most), %d streams per direction, %d connections waiting to identify (%d per client)",
		s.cfg.FDLimit, s.cfg.MaxTests, perTest(), s.cfg.MaxStreams, pending, s.pending.PerKey)
}
