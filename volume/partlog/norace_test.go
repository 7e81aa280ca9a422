//go:build !race

package partlog

const raceEnabled = false
