package redisfleet

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the node that holds the name's slot, reads the clock
// with TIME (Redis's clock decides every expiry), and purges what has expired before it decides.
// Times are microseconds. Numbers are passed to Redis as Lua numbers, which Redis 5 and later
// write exactly (integers below 2^53; fractions to the digits that read back the same), and which
// costs far less than string.format.
//
// The state of a name (see keys.go): the hash m — born (the epoch: when this state was created),
// qt (no new grants before it), tok (the last fencing token), held, nq, mexp, seq — the sorted
// set l of leases by expiry, and the queue: q (members by arrival) and qe (members by the expiry
// of their entry). Invariants every script keeps:
//   - held is the summed weight of the members of l; so held == 0 exactly when l is empty.
//   - nq is the number of members of q; q and qe have the same members.
//   - mexp is, while held > 0, at most the earliest expiry in l (a lower bound: renewals and
//     releases only raise the earliest expiry, so it goes stale on the safe side). While
//     now < mexp no lease can have expired, and a script need not look at l to purge it.
//   - A member is granted only from the head of q (or, with q empty, at once), only once
//     now >= qt, and only if held plus its weight stays within its capacity (the member is
//     "ID:CAPACITY:N": the scripts read both from it).
//   - tok only grows: a grant takes max(tok+1, now), so state created after a loss of data hands
//     out tokens above every earlier one.
//
// The uncontended paths come first and touch as little as they can (an Acquire: TIME, one read
// and two writes; a Release: three calls); everything else is defined below them and only runs
// when needed.

// slow is the shared part of the scripts' slow paths: it loads, creates and purges the state,
// tells the head of the queue when it fits, and says when a waiter should ask again.
const slow = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- weight reads capacity and weight from a member "ID:CAPACITY:N".
local function weight(m)
  local c, n = string.match(m, ':(%d+):(%d+)$')
  return tonumber(c), tonumber(n)
end

-- load reads the state. With create, a missing state — a new name, or data lost in a restart —
-- is created with a new epoch and admits nothing new for one TTL: leases granted before the loss
-- may still run, and register again on their next renewal within that time. A longer TTL seen
-- during the pause lengthens it.
local function load(now, ttl, create)
  local v = redis.call('HMGET', M, 'born', 'qt', 'tok', 'held', 'nq', 'mexp')
  local st = {born = tonumber(v[1]), qt = tonumber(v[2]) or 0, tok = tonumber(v[3]) or 0,
              held = tonumber(v[4]) or 0, nq = tonumber(v[5]) or 0, mexp = tonumber(v[6]) or 0}
  if not st.born then
    if not create then return nil end
    -- Anything left of an older state (a partial loss, as by eviction) is not counted: drop it.
    redis.call('DEL', L, Q, QE)
    st.born, st.qt, st.held, st.nq, st.mexp = now, now + ttl, 0, 0, 0
  elseif now < st.qt and st.born + ttl > st.qt then
    st.qt = st.born + ttl
  end
  return st
end

local function save(st)
  redis.call('HSET', M, 'born', (st.born), 'qt', (st.qt), 'tok', (st.tok),
             'held', (st.held), 'nq', (st.nq), 'mexp', (st.mexp))
end

local function chunks(list, f)
  for i = 1, #list, 1000 do f(unpack(list, i, math.min(i + 999, #list))) end
end

-- purge drops expired leases and dead queue entries.
local function purge(st, now)
  if st.held > 0 and now >= st.mexp then
    local dead = redis.call('ZRANGEBYSCORE', L, '-inf', (now))
    if #dead > 0 then
      for _, m in ipairs(dead) do
        local _, n = weight(m)
        st.held = st.held - n
      end
      redis.call('ZREMRANGEBYSCORE', L, '-inf', (now))
    end
    local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
    if #first == 0 then st.held, st.mexp = 0, 0 else st.mexp = tonumber(first[2]) end
  end
  if st.nq > 0 then
    local first = redis.call('ZRANGE', QE, 0, 0, 'WITHSCORES')
    if #first > 0 and tonumber(first[2]) <= now then
      chunks(redis.call('ZRANGEBYSCORE', QE, '-inf', (now)), function(...) redis.call('ZREM', Q, ...) end)
      redis.call('ZREMRANGEBYSCORE', QE, '-inf', (now))
    end
    st.nq = redis.call('ZCARD', Q)
  end
end

-- wake tells the head of the queue that it fits now, unless it is except.
local function wake(st, now, chan, except)
  if st.nq == 0 or now < st.qt then return end
  local head = redis.call('ZRANGE', Q, 0, 0)[1]
  if head and head ~= except then
    local c, n = weight(head)
    if st.held + n <= c then redis.call('PUBLISH', chan, head) end
  end
end

-- hint is how long a waiter may wait before asking again: until the next lease expiry (mexp is
-- at most that), queue-entry death or end of the pause, and at most a third of its TTL (which
-- keeps its own entry alive).
local function hint(st, now, ttl)
  local t = now + math.floor(ttl / 3)
  if st.held > 0 then t = math.min(t, st.mexp) end
  local q = redis.call('ZRANGE', QE, 0, 0, 'WITHSCORES')
  if q[2] then t = math.min(t, tonumber(q[2])) end
  if now < st.qt then t = math.min(t, st.qt) end
  return math.max(t - now, 100)
end
`

// acquire: KEYS m l q qe; ARGV member, ttl, wait (0/1), channel. Returns {1, token, epoch} when
// granted, else {0, retry-in, epoch}. Asked again for a member it granted (a reply was lost and
// the client repeated the call), it grants the same lease again: the same weight, a new expiry
// and a new token (the old one never reached anyone).
var acquireScript = redis.NewScript(acquireScriptSrc)

const acquireScriptSrc = `
local M, L, Q, QE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member, ttl, wait, chan = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', M, 'born', 'qt', 'tok', 'held', 'nq', 'mexp')
local born, qt, tok = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
local held, nq, mexp = tonumber(v[4]) or 0, tonumber(v[5]) or 0, tonumber(v[6]) or 0
local c, n = string.match(member, ':(%d+):(%d+)$')
c, n = tonumber(c), tonumber(n)
local exp = now + ttl
-- Uncontended: nobody queued, no pause, no lease that may have expired, and it fits.
if born and nq == 0 and now >= qt and (held == 0 or now < mexp) and held + n <= c then
  tok = math.max(tok + 1, now)
  if redis.call('ZADD', L, 'NX', exp, member) == 0 then
    redis.call('ZADD', L, exp, member)
    redis.call('HSET', M, 'tok', tok)
    return {1, tok, born}
  end
  if held == 0 then mexp = exp end
  redis.call('HSET', M, 'tok', tok, 'held', held + n, 'mexp', mexp)
  return {1, tok, born}
end
` + slow + `
local st = load(now, ttl, true)
purge(st, now)
local function grant()
  st.tok = math.max(st.tok + 1, now)
  if redis.call('ZADD', L, (exp), member) == 1 then
    if st.held == 0 then st.mexp = exp end
    st.held = st.held + n
  end
  save(st)
  wake(st, now, chan, nil)
  return {1, st.tok, st.born}
end
if redis.call('ZSCORE', L, member) then return grant() end -- repeated after a lost reply
local queued = st.nq > 0 and redis.call('ZSCORE', Q, member)
if not queued then
  if st.nq == 0 and now >= st.qt and st.held + n <= c then return grant() end
  if not wait then
    save(st)
    wake(st, now, chan, nil)
    return {0, hint(st, now, ttl), st.born}
  end
  redis.call('ZADD', Q, (redis.call('HINCRBY', M, 'seq', 1)), member)
  st.nq = st.nq + 1
end
redis.call('ZADD', QE, (now + ttl), member)
if now >= st.qt and st.held + n <= c and redis.call('ZRANGE', Q, 0, 0)[1] == member then
  redis.call('ZREM', Q, member)
  redis.call('ZREM', QE, member)
  st.nq = st.nq - 1
  return grant()
end
save(st)
wake(st, now, chan, member)
return {0, hint(st, now, ttl), st.born}
`

// release: KEYS m l q qe; ARGV channel, members... Removes each member's lease and queue entry.
// Returns the number of leases removed.
var releaseScript = redis.NewScript(`
local M, L, Q, QE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local chan = ARGV[1]
local removed, freed = 0, 0
for i = 2, #ARGV do
  if redis.call('ZREM', L, ARGV[i]) == 1 then
    removed = removed + 1
    freed = freed + tonumber(string.match(ARGV[i], ':(%d+)$'))
  end
end
local v = redis.call('HMGET', M, 'born', 'held', 'nq')
if not v[1] then return removed end -- no state (lost): nothing is counted, nothing to do
if (tonumber(v[3]) or 0) == 0 then -- nobody queued
  if freed > 0 then redis.call('HSET', M, 'held', (tonumber(v[2]) or 0) - freed) end
  return removed
end
` + slow + `
local now = clock()
local st = load(now, 0, false)
st.held = st.held - freed
for i = 2, #ARGV do
  if redis.call('ZREM', Q, ARGV[i]) == 1 then redis.call('ZREM', QE, ARGV[i]) end
end
purge(st, now)
save(st)
wake(st, now, chan, nil)
return removed
`)

// renew: KEYS m l q qe; ARGV ttl, channel, then member, token, epoch for each lease. Returns
// {epoch, status...}, status 1 renewed, 2 registered again (granted in an earlier epoch, and it
// fits), 0 lost.
var renewScript = redis.NewScript(`
local M, L, Q, QE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
` + slow + `
local ttl, chan = tonumber(ARGV[1]), ARGV[2]
local now = clock()
local st = load(now, ttl, true)
purge(st, now)
local out = {st.born}
local exp = (now + ttl)
for i = 3, #ARGV, 3 do
  local m, tok, ep = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local r = 0
  if redis.call('ZADD', L, 'XX', 'CH', exp, m) == 1 or redis.call('ZSCORE', L, m) then
    r = 1
  elseif ep ~= st.born then
    local c, n = weight(m)
    if st.held + n <= c then
      redis.call('ZADD', L, exp, m)
      if st.held == 0 then st.mexp = now + ttl end
      st.held = st.held + n
      st.tok = math.max(st.tok, tonumber(tok))
      r = 2
    end
  end
  out[#out + 1] = r
end
save(st)
wake(st, now, chan, nil)
return out
`)

// The rate bucket (GCRA): KEYS[1] holds tat, the theoretical arrival time of the next token
// beyond a full bucket; a token comes every interval T, the bucket holds B.
const ratePrelude = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function store(tat, now)
  redis.call('SET', KEYS[1], tat, 'PX', math.max(math.ceil((tat - now) / 1000), 0) + 1000)
end
`

// reserve: ARGV interval (µs), burst, max-wait (µs; negative: none). Returns {1, delay, mark µs,
// mark's thousandths of a µs} when reserved, {0, delay} when the token would come later than
// max-wait. (The mark travels as two integers: a reply cannot carry a fraction.)
var reserveScript = redis.NewScript(ratePrelude + `
local T, B, maxw = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = clock()
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local nxt = tat + T
local delay = math.max(nxt - B * T - now, 0)
if maxw >= 0 and delay > maxw then return {0, math.ceil(delay)} end
store(nxt, now)
local whole = math.floor(nxt)
return {1, math.ceil(delay), whole, math.floor((nxt - whole) * 1000 + 0.5)}
`)

// cancel: ARGV interval, burst, mark. Gives back the reservation's token if it has not come due,
// as far as no later reservation depends on it.
var cancelScript = redis.NewScript(ratePrelude + `
local T, B, mark = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then return 0 end
local now = clock()
if now >= mark - B * T then return 0 end
local restore = math.min(T, T - (tat - mark))
if restore <= 0 then return 0 end
store(tat - restore, now)
return 1
`)
