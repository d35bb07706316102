package redisfleet_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
)

// Every replica of a service runs this: together they never have more than 40 calls in flight to
// the API, whichever replica makes them. (It needs a Redis, so it is compiled but not run here; the
// examples of package fleet run the same code on the in-memory backend.)
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // ctx deadlines bound each call to Redis
	})
	defer rdb.Close()
	sem := fleet.New(redisfleet.New(rdb), "llm-api", 40, fleet.WithLease(15*time.Second))
	defer sem.Close()

	ctx := context.Background()
	p, err := sem.AcquireTimeout(ctx, 1, 30*time.Second)
	if err != nil {
		fmt.Println(err) // fleet.ErrTimeout, or fleet.ErrUnavailable while Redis is down
		return
	}
	defer p.Release()
	ctx, stop := p.WithContext(ctx) // cancelled with fleet.ErrLeaseLost if the lease is lost
	defer stop()
	_ = ctx // call the API with ctx

	// A rate shared by the fleet too: at most 10 call starts per second, bursts of 20.
	rate := fleet.NewRate(redisfleet.New(rdb), "llm-api", 10, 20)
	if err := rate.Wait(ctx); err != nil {
		fmt.Println(err)
	}
}
