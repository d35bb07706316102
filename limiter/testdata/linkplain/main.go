// Command linkplain uses only limiter.Do: TestPlainProgramLinksNoFleetCode builds it and reads
// its symbols.
package main

import (
	"context"

	"github.com/goloom/loom/limiter"
)

func main() { _ = limiter.New(1).Do(context.Background(), func(context.Context) error { return nil }) }
