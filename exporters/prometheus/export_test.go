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

// Kept returns the names a collector of NewCollector keeps between scrapes, each as
// "label=name".
func Kept(c any) []string {
	cc := c.(*collector)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var out []string
	for _, k := range cc.names.Keys() {
		out = append(out, k.Label+"="+k.Name)
	}
	return out
}
