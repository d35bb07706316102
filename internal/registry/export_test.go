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
