package redisfleet

import "strings"

// Internals for the external tests.
var (
	Escape       = escape
	ParseAcquire = parseAcquire
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
