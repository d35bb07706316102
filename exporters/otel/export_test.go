package otel

// StatsRead returns the stats the exporter reads of each limiter and each fleet semaphore, so
// that a test can check that limiter.Stats and fleet.Stats still have every one.
func StatsRead() (limiters, semaphores []string) {
	for _, in := range families[0].instruments {
		limiters = append(limiters, in.stat)
	}
	for _, in := range families[1].instruments {
		semaphores = append(semaphores, in.stat)
	}
	return limiters, semaphores
}
