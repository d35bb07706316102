package scope

// LaunchInUse reports whether forks start their goroutines through their launches (see launch):
// they must, on every platform Go runs on today.
func LaunchInUse() bool { return launchCode != 0 }

// SetLaunch turns the start of goroutines through launches on or off and returns what it was, for
// the benchmark of what a launch saves and the tests of the fallback.
func SetLaunch(on bool) (was bool) {
	was = launchCode != 0
	if on {
		launchCode = launchWorks()
	} else {
		launchCode = 0
	}
	return was
}
