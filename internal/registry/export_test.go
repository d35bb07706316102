package registry

// SetFramePointers switches the frame-pointer walk of Open on or off and returns what it was, so
// that tests can check the runtime.Callers fallback gives the same sites.
func SetFramePointers(on bool) (was bool) {
	was, useFP = useFP, on && haveFP
	return was
}

// FuncPC is funcPC, for its test against reflect.
func FuncPC(fn any) uintptr { return funcPC(fn) }

// TableIndex returns the slot seq picks in a fresh table of n slots, and the number of slots
// that share a cache line.
func TableIndex(n int, seq uintptr) (slot, perLine uintptr) {
	return newTable(n, nil).index(seq), slotsPerLine
}

// FramePointersInUse reports whether Open walks frame pointers: it must, on amd64 and arm64,
// once init has checked the walk.
func FramePointersInUse() bool { return useFP }

// BothWalks returns the return addresses that callers finds above its caller's caller, once
// walking frame pointers and once through runtime.Callers, from the same call site.
func BothWalks() (fp, rt []uintptr) {
	was := useFP
	defer func() { useFP = was }()
	var out [2][]uintptr
	for i, on := range []bool{haveFP && fpWorks(), false} {
		useFP = on
		pcs := make([]uintptr, 32)
		out[i] = pcs[:walkProbe(pcs)]
	}
	return out[0], out[1]
}

//go:noinline
func walkProbe(pcs []uintptr) int { return callers(pcs) }
