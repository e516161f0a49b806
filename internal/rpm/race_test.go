//go:build race

package rpm

// The race detector makes sync.Pool drop items, so allocation counts under
// it say nothing about the code.
const raceEnabled = true
