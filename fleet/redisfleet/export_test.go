package redisfleet

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Internals for the external tests.
var (
	Escape       = escape
	ParseAcquire = parseAcquire
	ParseRelease = parseRelease
	ParseRenew   = parseRenew
	ParseReserve = parseReserve
	IDOf         = idOf
	Member       = member
)

// Keys returns every key of name, and the channel of an instance's grants.
func Keys(name string) (keys []string, channel string) {
	k := keysOf(name)
	return append(append([]string(nil), k.sem...), k.rate...), k.channel("0123456789abcdef")
}

var ParseGrant = parseGrant

// HashTag returns the part of key that Redis Cluster hashes: the text between the first "{" and
// the first "}" after it, if that is not empty; else the whole key.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// Held returns the summed weight of the leases of name as its state on the Redis behind c says,
// and whether there is a state.
func Held(ctx context.Context, c redis.Cmdable, name string) (int64, bool, error) {
	h, err := c.HGet(ctx, keysOf(name).sem[0], "h").Int64()
	if err == redis.Nil {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if h >= 1<<51 { // (see scripts.go: h is held + 2^52 while anyone is queued)
		h -= 1 << 52
	}
	return h, true, nil
}
