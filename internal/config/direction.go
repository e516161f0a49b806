package config

// Direction is one way of traffic through the WAN: what a queue's rates,
// the shaper's trees, autorate's controllers and the lab's emulated modem
// each have one of. The router shapes Download on ingress (redirected to
// the IFB) and Upload on egress (the WAN device's root).
type Direction int

const (
	Download Direction = iota
	Upload
)

// Directions are both, in the order of Rates.
var Directions = [2]Direction{Download, Upload}

func (d Direction) String() string {
	if d == Upload {
		return "upload"
	}
	return "download"
}

// Side is where the router shapes d, the word tc, the doctor's findings
// and the logs use: "ingress" or "egress".
func (d Direction) Side() string {
	if d == Upload {
		return "egress"
	}
	return "ingress"
}

// Of is the rate of direction d.
func (r Rates) Of(d Direction) int {
	if d == Upload {
		return r.Upload
	}
	return r.Download
}

// Set sets the rate of direction d.
func (r *Rates) Set(d Direction, kbit int) {
	if d == Upload {
		r.Upload = kbit
	} else {
		r.Download = kbit
	}
}

// Rate is the queue's rate in direction d; 0 when it does not shape it.
func (q Queue) Rate(d Direction) int { return Rates{Download: q.Download, Upload: q.Upload}.Of(d) }

// SetRate sets the queue's rate in direction d.
func (q *Queue) SetRate(d Direction, kbit int) {
	r := Rates{Download: q.Download, Upload: q.Upload}
	r.Set(d, kbit)
	q.Download, q.Upload = r.Download, r.Upload
}
