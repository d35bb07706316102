//go:build !race

package scope_test

const raceEnabled = false
