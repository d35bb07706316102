package prometheus

// StatsRead returns the stats the collector reads of each limiter and each fleet semaphore, so
// that a test can check that limiter.Stats and fleet.Stats still have every one.
func StatsRead() (limiters, semaphores []string) {
	for _, m := range limiterMetrics {
		limiters = append(limiters, m.stat)
	}
	for _, m := range semaphoreMetrics {
		semaphores = append(semaphores, m.stat)
	}
	return limiters, semaphores
}
