//go:build !race

package rpm

const raceEnabled = false
