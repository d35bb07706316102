package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartCluster starts a one-node Redis Cluster: a server in cluster mode that owns every slot.
// Scripts there fail with CROSSSLOT if their keys hash to different slots, and pub/sub goes
// through the cluster bus, as on a real Cluster.
func StartCluster(tb testing.TB) *Server {
	tb.Helper()
	s := Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	c := redis.NewClient(s.Options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %v", err)
	}
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("redistest: the cluster did not come up: %v %q", err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ClusterClient returns a cluster client of a server from StartCluster, closed when the test
// ends.
func (s *Server) ClusterClient() *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{s.Addr},
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
	})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}
