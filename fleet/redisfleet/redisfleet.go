// Package redisfleet is the Redis backend of package fleet: fleet-wide semaphores of leased
// permits, and fleet-wide rate buckets, kept in Redis by Lua scripts.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	sem := fleet.New(redisfleet.New(rdb), "llm-api", 40)
//
// It works on a single node, with Sentinel and with Cluster: every key of a name carries the name
// as its hash tag ("fleet:{NAME}:..."), so one name lives in one slot. Each operation is one
// script, run with EVALSHA (EVAL when Redis answers NOSCRIPT, after a restart or a SCRIPT FLUSH),
// atomic on the server, and reads the server's clock (TIME) for every expiry; no client clock is
// ever compared with another. The scripts purge expired leases and dead queue entries themselves,
// so nothing grows without bound: a name's state is a few small keys whatever the traffic, and
// empty sets disappear on their own. A name keeps one small hash (its epoch and token counter)
// for as long as Redis keeps its data.
//
// Wake-ups travel by Redis pub/sub (one subscription per waiting Semaphore), as hints only:
// waiters also ask again at the times the scripts give, so a lost message or a dropped connection
// costs latency, never a permit.
//
// Timeouts: a Semaphore passes the caller's ctx to every call of an Acquire. go-redis applies a
// ctx's deadline to the network only with Options.ContextTimeoutEnabled; without it, the
// client's ReadTimeout and WriteTimeout bound each call (and its retries) instead. Either way a
// call never hangs. Run Redis with maxmemory-policy noeviction (or without maxmemory): an evicted
// key is a loss of data, which the scripts survive only if the whole state of a name goes at
// once.
//
// It needs Redis 5.0 or later (tested with 7.0).
package redisfleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
)

// New returns a [fleet.Backend] on the Redis behind c: a *redis.Client, a *redis.ClusterClient,
// a failover (Sentinel) client or a *redis.Ring (for a Ring, a name's keys go to one shard by its
// hash tag). The backend keeps no state of its own; many Semaphores and Rates may share it, and c
// may serve other uses too. It panics if c is nil.
func New(c redis.UniversalClient) fleet.Backend {
	if c == nil {
		panic("redisfleet: New: nil client")
	}
	return &backend{c: c}
}

type backend struct {
	c redis.UniversalClient
}

func member(l fleetdriver.Lease) string {
	return l.ID + ":" + strconv.FormatInt(l.Capacity, 10) + ":" + strconv.FormatInt(l.N, 10)
}

// idOf returns the lease ID of a member.
func idOf(m string) string {
	i := strings.LastIndexByte(m, ':')
	if i < 0 {
		return m
	}
	j := strings.LastIndexByte(m[:i], ':')
	if j < 0 {
		return m
	}
	return m[:j]
}

func micros(d time.Duration) string {
	return strconv.FormatInt(d.Microseconds(), 10)
}

func checkName(op, name string) error {
	if name == "" {
		return fmt.Errorf("redisfleet: %s: empty name", op)
	}
	return nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (b *backend) Acquire(ctx context.Context, req fleetdriver.AcquireRequest) (fleetdriver.AcquireReply, error) {
	if err := checkName("Acquire", req.Name); err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	if err := checkBehind("Acquire", req); err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	v, err := acquireScript.Run(ctx, b.c, keysOf(req.Name).sem, acquireArgs(make([]any, 0, 7+len(req.Behind)), req)...).Slice()
	if err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	return parseAcquire(v, len(req.Behind))
}

// acquireArgs appends the acquire script's ARGV for req.
func acquireArgs(args []any, req fleetdriver.AcquireRequest) []any {
	args = append(args, member(req.Lease), micros(req.TTL), boolArg(req.Wait), micros(req.Heartbeat),
		boolArg(req.Push), strconv.FormatUint(req.Seen, 16), micros(req.LongestTTL))
	for _, l := range req.Behind {
		args = append(args, member(l))
	}
	return args
}

// checkBehind refuses what the scripts must never see: Behind without a wait that pushes, or
// longer than MaxBehind.
func checkBehind(op string, req fleetdriver.AcquireRequest) error {
	switch {
	case len(req.Behind) == 0:
		return nil
	case !req.Wait || !req.Push:
		return fmt.Errorf("redisfleet: %s: Behind needs Wait and Push", op)
	case len(req.Behind) > fleetdriver.MaxBehind:
		return fmt.Errorf("redisfleet: %s: %d requests behind, above the maximum %d", op, len(req.Behind), fleetdriver.MaxBehind)
	}
	return nil
}

// ints reads a reply of integers.
func ints(op string, v []any, n []int64) error {
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return fmt.Errorf("redisfleet: %s: element %d of the reply is %T", op, i, v[i])
		}
		n[i] = x
	}
	return nil
}

// pause reads the pause, its reason and the longest TTL of a reply.
func pause(us, why, longest int64) (time.Duration, fleetdriver.PauseReason, time.Duration, bool) {
	if us < 0 || why < 0 || why > int64(fleetdriver.PauseWentBack) || longest < 0 || (us > 0) != (why > 0) {
		return 0, 0, 0, false
	}
	return microsToDuration(us), fleetdriver.PauseReason(why), microsToDuration(longest), true
}

// parseAcquire reads the acquire script's reply for a request with behind leases behind its own:
// {1, token, epoch, paused, why, longest, queued, free, behind tokens...} or {0, retry-in µs,
// epoch, paused, why, longest, queued, free, behind tokens...}.
func parseAcquire(v []any, behind int) (fleetdriver.AcquireReply, error) {
	if behind < 0 || len(v) != 8+behind {
		return fleetdriver.AcquireReply{}, fmt.Errorf("redisfleet: acquire: reply of %d elements for %d behind", len(v), behind)
	}
	var buf [8 + 8]int64 // on the stack for up to 8 behind; more are rare
	var n []int64
	if len(v) <= len(buf) {
		n = buf[:len(v)]
	} else {
		n = make([]int64, len(v))
	}
	if err := ints("acquire", v, n); err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	var rep fleetdriver.AcquireReply
	var ok bool
	rep.Paused, rep.Pause, rep.LongestTTL, ok = pause(n[3], n[4], n[5])
	rep.Queued, rep.Free = n[6], n[7]
	if behind > 0 {
		rep.Behind = make([]uint64, behind)
		for i, tok := range n[8:] {
			if tok < 0 {
				ok = false
			}
			rep.Behind[i] = uint64(tok)
		}
	}
	switch {
	case !ok, n[6] < 0:
	case n[0] == 1 && n[1] > 0:
		rep.Granted, rep.Token, rep.Epoch = true, uint64(n[1]), n[2]
		return rep, nil
	case n[0] == 0 && n[1] > 0:
		rep.RetryIn, rep.Epoch = microsToDuration(n[1]), n[2]
		return rep, nil
	}
	return fleetdriver.AcquireReply{}, fmt.Errorf("redisfleet: acquire: bad reply %v", v)
}

func (b *backend) Renew(ctx context.Context, req fleetdriver.RenewRequest) (fleetdriver.RenewReply, error) {
	if err := checkName("Renew", req.Name); err != nil {
		return fleetdriver.RenewReply{}, err
	}
	if len(req.Leases)+len(req.Register) == 0 {
		return fleetdriver.RenewReply{}, errors.New("redisfleet: Renew: no leases")
	}
	k := keysOf(req.Name)
	args := make([]any, 0, 4+3*len(req.Leases)+2*len(req.Register))
	args = append(args, micros(req.TTL), strconv.FormatUint(req.Seen, 16), micros(req.LongestTTL), len(req.Leases))
	for _, l := range req.Leases {
		args = append(args, member(l), strconv.FormatUint(l.Token, 16), strconv.FormatUint(uint64(max(l.Epoch, 0)), 16))
	}
	for _, l := range req.Register {
		args = append(args, member(l), strconv.FormatUint(l.Token, 16))
	}
	v, err := renewScript.Run(ctx, b.c, k.sem, args...).Slice()
	if err != nil {
		return fleetdriver.RenewReply{}, err
	}
	return parseRenew(v, len(req.Leases)+len(req.Register))
}

// parseRenew reads the renew script's reply: {epoch, paused, why, longest, status...}.
func parseRenew(v []any, leases int) (fleetdriver.RenewReply, error) {
	if leases < 0 || len(v) != leases+4 {
		return fleetdriver.RenewReply{}, fmt.Errorf("redisfleet: renew: reply of %d elements for %d leases", len(v), leases)
	}
	var n [4]int64
	if err := ints("renew", v, n[:]); err != nil {
		return fleetdriver.RenewReply{}, err
	}
	rep := fleetdriver.RenewReply{Epoch: n[0], Status: make([]fleetdriver.LeaseStatus, leases)}
	var ok bool
	if rep.Paused, rep.Pause, rep.LongestTTL, ok = pause(n[1], n[2], n[3]); !ok {
		return fleetdriver.RenewReply{}, fmt.Errorf("redisfleet: renew: bad reply %v", v)
	}
	for i := range leases {
		switch v[i+4] {
		case int64(0):
			rep.Status[i] = fleetdriver.LeaseLost
		case int64(1):
			rep.Status[i] = fleetdriver.LeaseRenewed
		case int64(2):
			rep.Status[i] = fleetdriver.LeaseReregistered
		default:
			return fleetdriver.RenewReply{}, fmt.Errorf("redisfleet: renew: bad status %v", v[i+4])
		}
	}
	return rep, nil
}

func (b *backend) Release(ctx context.Context, req fleetdriver.ReleaseRequest) (fleetdriver.ReleaseReply, error) {
	if err := checkName("Release", req.Name); err != nil {
		return fleetdriver.ReleaseReply{}, err
	}
	if len(req.Leases) == 0 && req.Then == nil {
		return fleetdriver.ReleaseReply{}, nil
	}
	args := make([]any, 0, 8+len(req.Leases))
	args = append(args, len(req.Leases))
	for _, l := range req.Leases {
		args = append(args, member(l))
	}
	behind := -1 // no Then
	if req.Then != nil {
		if err := checkName("Release", req.Then.Name); err != nil || req.Then.Name != req.Name {
			return fleetdriver.ReleaseReply{}, fmt.Errorf("redisfleet: Release: Then is for %q, not %q", req.Then.Name, req.Name)
		}
		if err := checkBehind("Release", *req.Then); err != nil {
			return fleetdriver.ReleaseReply{}, err
		}
		args = acquireArgs(args, *req.Then)
		behind = len(req.Then.Behind)
	}
	v, err := releaseScript.Run(ctx, b.c, keysOf(req.Name).sem, args...).Slice()
	if err != nil {
		return fleetdriver.ReleaseReply{}, err
	}
	return parseRelease(v, behind)
}

// parseRelease reads the release script's reply: {removed, queued, free}, or, for a release whose
// Then carried behind leases (-1: no Then), {removed, queued, free, acquire reply...}.
func parseRelease(v []any, behind int) (fleetdriver.ReleaseReply, error) {
	if len(v) < 3 || behind < 0 && len(v) != 3 {
		return fleetdriver.ReleaseReply{}, fmt.Errorf("redisfleet: release: reply of %d elements", len(v))
	}
	var n [3]int64
	if err := ints("release", v, n[:]); err != nil {
		return fleetdriver.ReleaseReply{}, err
	}
	if n[0] < 0 || n[1] < 0 {
		return fleetdriver.ReleaseReply{}, fmt.Errorf("redisfleet: release: bad reply %v", v)
	}
	rep := fleetdriver.ReleaseReply{Queued: n[1], Free: n[2]}
	if behind >= 0 {
		var err error
		if rep.Then, err = parseAcquire(v[3:], behind); err != nil {
			return fleetdriver.ReleaseReply{}, err
		}
	}
	return rep, nil
}

// Subscribe listens on the channel of inst's grants with a connection of its own. After a
// reconnect (go-redis resubscribes by itself) it delivers a zero Lease, as grants may have been
// missed meanwhile.
func (b *backend) Subscribe(ctx context.Context, name, inst string, deliver func(fleetdriver.Lease)) (func(), error) {
	if err := checkName("Subscribe", name); err != nil {
		return nil, err
	}
	if deliver == nil {
		panic("redisfleet: Subscribe: nil deliver function")
	}
	ps := b.c.Subscribe(ctx, keysOf(name).channel(inst))
	if _, err := ps.Receive(ctx); err != nil { // the confirmation: from here on, nothing is missed
		_ = ps.Close()
		return nil, err
	}
	msgs := ps.ChannelWithSubscriptions()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range msgs {
			switch m := m.(type) {
			case *redis.Message:
				if g, ok := parseGrant(m.Payload); ok {
					deliver(g)
				}
			case *redis.Subscription: // (re)subscribed: grants may have been missed
				deliver(fleetdriver.Lease{})
			}
		}
	}()
	return func() {
		_ = ps.Close()
		<-done
	}, nil
}

// parseGrant reads a pushed grant: "MEMBER TOKEN EPOCH".
func parseGrant(s string) (fleetdriver.Lease, bool) {
	m, rest, ok := strings.Cut(s, " ")
	if !ok {
		return fleetdriver.Lease{}, false
	}
	tok, ep, ok := strings.Cut(rest, " ")
	if !ok {
		return fleetdriver.Lease{}, false
	}
	l, ok := parseMember(m)
	if !ok {
		return fleetdriver.Lease{}, false
	}
	var err1, err2 error
	l.Token, err1 = strconv.ParseUint(tok, 10, 64)
	l.Epoch, err2 = strconv.ParseInt(ep, 10, 64)
	if err1 != nil || err2 != nil || l.Token == 0 {
		return fleetdriver.Lease{}, false
	}
	return l, true
}

// parseMember reads "ID:CAPACITY:N".
func parseMember(m string) (fleetdriver.Lease, bool) {
	j := strings.LastIndexByte(m, ':')
	if j < 0 {
		return fleetdriver.Lease{}, false
	}
	i := strings.LastIndexByte(m[:j], ':')
	if i <= 0 {
		return fleetdriver.Lease{}, false
	}
	c, err1 := strconv.ParseInt(m[i+1:j], 10, 64)
	n, err2 := strconv.ParseInt(m[j+1:], 10, 64)
	if err1 != nil || err2 != nil || c < 1 || n < 1 {
		return fleetdriver.Lease{}, false
	}
	return fleetdriver.Lease{ID: m[:i], Capacity: c, N: n}, true
}

// maxInterval bounds a token's interval, in µs: the largest Duration. A slower rate behaves as
// this one — its next token comes after the largest wait a caller can express — and the scripts'
// numbers stay exact integers.
const maxInterval = float64(math.MaxInt64 / int64(time.Microsecond))

func rateArgs(perSecond float64, burst int64) (interval, size string) {
	return strconv.FormatFloat(min(1e6/perSecond, maxInterval), 'f', 3, 64), strconv.FormatInt(burst, 10)
}

func (b *backend) Reserve(ctx context.Context, req fleetdriver.RateRequest) (fleetdriver.RateReply, error) {
	if err := checkName("Reserve", req.Name); err != nil {
		return fleetdriver.RateReply{}, err
	}
	if !(req.PerSecond > 0) || req.Burst < 1 {
		return fleetdriver.RateReply{}, fmt.Errorf("redisfleet: Reserve: bad rate %v, burst %d", req.PerSecond, req.Burst)
	}
	interval, size := rateArgs(req.PerSecond, req.Burst)
	maxWait := "-1"
	if req.MaxWait >= 0 {
		maxWait = micros(req.MaxWait)
	}
	v, err := reserveScript.Run(ctx, b.c, keysOf(req.Name).rate, interval, size, maxWait).Slice()
	if err != nil {
		return fleetdriver.RateReply{}, err
	}
	return parseReserve(v)
}

// parseReserve reads the reserve script's reply: {1, delay µs, mark µs, thousandths} or
// {0, delay µs}.
func parseReserve(v []any) (fleetdriver.RateReply, error) {
	if len(v) < 2 {
		return fleetdriver.RateReply{}, fmt.Errorf("redisfleet: reserve: reply of %d elements", len(v))
	}
	var n [4]int64
	for i := range v {
		x, ok := v[i].(int64)
		if !ok || i >= len(n) {
			return fleetdriver.RateReply{}, fmt.Errorf("redisfleet: reserve: bad reply %v", v)
		}
		n[i] = x
	}
	switch {
	case n[1] < 0:
		return fleetdriver.RateReply{}, fmt.Errorf("redisfleet: reserve: bad reply %v", v)
	case n[0] == 1 && len(v) == 4 && n[2] >= 0 && n[3] >= 0 && n[3] < 1000:
		mark := strconv.FormatInt(n[2], 10) + "." + fmt.Sprintf("%03d", n[3])
		return fleetdriver.RateReply{OK: true, Delay: microsToDuration(n[1]), Mark: mark}, nil
	case n[0] == 0 && len(v) == 2:
		return fleetdriver.RateReply{Delay: microsToDuration(n[1])}, nil
	default:
		return fleetdriver.RateReply{}, fmt.Errorf("redisfleet: reserve: bad reply %v", v)
	}
}

func (b *backend) CancelReservation(ctx context.Context, req fleetdriver.RateCancel) error {
	if err := checkName("CancelReservation", req.Name); err != nil {
		return err
	}
	if _, err := strconv.ParseFloat(req.Mark, 64); err != nil || !(req.PerSecond > 0) || req.Burst < 1 {
		return fmt.Errorf("redisfleet: CancelReservation: bad reservation %q (rate %v, burst %d)", req.Mark, req.PerSecond, req.Burst)
	}
	interval, size := rateArgs(req.PerSecond, req.Burst)
	return cancelScript.Run(ctx, b.c, keysOf(req.Name).rate, interval, size, req.Mark).Err()
}
