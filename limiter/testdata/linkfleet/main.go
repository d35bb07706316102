// Command linkfleet uses limiter.WithFleet: the control of TestPlainProgramLinksNoFleetCode.
package main

import (
	"context"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/limiter"
)

func main() {
	sem := fleet.New(fleet.NewMemory(), "api", 1)
	defer func() { _ = sem.Close() }()
	_ = limiter.New(1, limiter.WithFleet(sem)).Do(context.Background(), func(context.Context) error { return nil })
}
