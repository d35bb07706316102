package redisfleet

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the node that holds the name's slot, reads the clock
// with TIME (Redis's clock decides every expiry), and purges what has expired before it decides.
// Times are microseconds. Numbers are passed to Redis as Lua numbers, which Redis 5 and later
// write exactly (integers below 2^53), and which costs far less than string.format.
//
// The state of a name (see keys.go): the hash m — born (the epoch: when this state was created,
// or found to have gone back in time), qt (no new grants before it), why (the reason of that
// pause), tok (the last fencing token), held, nq, mexp, seq, rid (the run ID of the server that
// last confirmed the state), rchk (when a script last trusted it), mttl and mttlx (the longest
// lease TTL seen, and until when a lease of it may live) — the sorted set l of leases by expiry,
// and the queue: q (members by arrival), qe (members by the death of their entry) and qx
// (member → "TTL:PUSH").
// Invariants every script keeps:
//   - held is the summed weight of the members of l; so held == 0 exactly when l is empty.
//   - nq is the number of members of q; q, qe and qx have the same members.
//   - mexp is, while held > 0, at most the earliest expiry in l (a lower bound: renewals and
//     releases only raise the earliest expiry, and each new lease lowers mexp to its own expiry
//     if that is earlier). While now < mexp no lease can have expired, and a script need not
//     look at l to purge it.
//   - A member is granted only from the head of q (or, with q empty, at once), only once
//     now >= qt, and only if held plus its weight stays within its capacity (the member is
//     "ID:CAPACITY:N": the scripts read both from it). A queued member whose asker listens for
//     pushes (PUSH 1) is granted only if the push reaches a subscriber: PUBLISH counting nobody
//     means its process died, and the queue moves on at once.
//   - tok only grows: a grant takes max(tok+1, now, seen+1), so state created after a loss of
//     data hands out tokens above every earlier one.
//   - The state is trusted only in the server run that last confirmed it: a script that finds
//     rid different from the server's run ID (a restart, a restore from an older RDB, an AOF that
//     lost its tail, a promoted replica) starts a new epoch and pauses admission for the longest
//     TTL that may be in use, so that every live lease can register again first. rchk is the time
//     of the last script that trusted the state; a script trusts it without reading INFO only
//     within a millisecond after rchk (never before it: a clock that went back is suspect), and
//     every script that trusts or confirms it moves rchk to its own time. A state that went back
//     in time was saved before the loss, so its rchk is no later than the last script before the
//     loss: it is trusted only if the server lost its data, came back and loaded it within a
//     millisecond of that script (a restart of redis-server takes several: 7.5 ms at least,
//     measured from exec to its first reply), or if a failover landed on a node whose clock lags
//     by the failover's own duration to within that millisecond. So under steady traffic INFO is
//     never read; only a name idle for a millisecond pays for it (5 µs).
//
// The uncontended paths come first and touch as little as they can (an Acquire: TIME, one read
// and two writes; a Release with nobody queued: three calls); everything else is defined below
// them and only runs when needed.

// slow is the shared part of the scripts' slow paths: it loads, creates and purges the state,
// grants the queue's heads when they fit, and says when a waiter should ask again.
const slow = `
local P = string.sub(M, 1, -2) -- "fleet:{NAME}:"

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- weight reads capacity and weight from a member "ID:CAPACITY:N".
local function weight(m)
  local c, n = string.match(m, ':(%d+):(%d+)$')
  return tonumber(c), tonumber(n)
end

local function runid()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
end

-- seettl notes a request's TTL: the longest one is remembered while a lease of it may live.
local function seettl(st, now, ttl)
  if ttl <= 0 then return end
  if ttl > st.mttl or now >= st.mttlx then
    st.mttl, st.mttlx = ttl, now + ttl
  elseif ttl == st.mttl and now + ttl > st.mttlx then
    st.mttlx = now + ttl
  end
end

-- load reads the state. With create, a missing state — a new name, or data lost in a restart —
-- is created with a new epoch and admits nothing new for the longest TTL that may be in use:
-- leases granted before the loss may still run, and register again on their next renewal
-- within that time. A state confirmed by another server run may have gone back in time: it gets
-- a new epoch and the same pause, and its leases still count. A longer TTL seen during the
-- pause lengthens it.
local function load(now, ttl, longest, create)
  local v = redis.call('HMGET', M, 'born', 'qt', 'tok', 'held', 'nq', 'mexp', 'rid', 'rchk', 'mttl', 'mttlx', 'why')
  local st = {born = tonumber(v[1]), qt = tonumber(v[2]) or 0, tok = tonumber(v[3]) or 0,
              held = tonumber(v[4]) or 0, nq = tonumber(v[5]) or 0, mexp = tonumber(v[6]) or 0,
              rid = v[7], rchk = tonumber(v[8]) or 0, mttl = tonumber(v[9]) or 0,
              mttlx = tonumber(v[10]) or 0, why = tonumber(v[11]) or 0}
  if not st.born then
    if not create then return nil end
    -- Anything left of an older state (a partial loss, as by eviction) is not counted: drop it.
    redis.call('DEL', L, Q, QE, QX)
    st.born, st.held, st.nq, st.mexp = now, 0, 0, 0
    st.rid, st.rchk = runid(), now
    st.qt, st.why = now + math.max(ttl, longest, 1000000), 1
  elseif now - st.rchk >= 1000 or now < st.rchk then
    local rid = runid()
    if rid ~= st.rid then
      st.rid = rid
      st.born = math.max(now, st.born + 1)
      -- The longest TTL that may be in use: the call's own (none for a release), the longest
      -- its asker has heard of, the longest this state remembers even if it lapsed since (the
      -- state is old), and never less than the shortest lease (1 s).
      st.qt, st.why = now + math.max(ttl, longest, st.mttl, 1000000), 2
    end
  end
  st.rchk = now -- trusted (or confirmed) now: save moves the window on
  if now < st.qt and st.born + ttl > st.qt then st.qt = st.born + ttl end
  seettl(st, now, ttl)
  return st
end

local function save(st)
  redis.call('HSET', M, 'born', (st.born), 'qt', (st.qt), 'tok', (st.tok), 'held', (st.held),
             'nq', (st.nq), 'mexp', (st.mexp), 'rid', st.rid, 'rchk', (st.rchk), 'mttl', (st.mttl),
             'mttlx', (st.mttlx), 'why', (st.why))
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
      chunks(redis.call('ZRANGEBYSCORE', QE, '-inf', (now)), function(...)
        redis.call('ZREM', Q, ...)
        redis.call('HDEL', QX, ...)
      end)
      redis.call('ZREMRANGEBYSCORE', QE, '-inf', (now))
      st.nq = redis.call('ZCARD', Q)
    end
  end
end

-- lease adds a lease of member expiring at exp.
local function lease(st, member, n, exp)
  if redis.call('ZADD', L, (exp), member) == 1 then
    if st.held == 0 or exp < st.mexp then st.mexp = exp end
    st.held = st.held + n
  end
end

local function dequeue(st, member)
  redis.call('ZREM', Q, member)
  redis.call('ZREM', QE, member)
  redis.call('HDEL', QX, member)
  st.nq = st.nq - 1
end

-- heads grants the head of the queue, and the next, while they fit and no pause holds, but not
-- except (the caller's own entry: its reply tells it). Each grant is pushed to the channel of
-- its asker's instance; one that reaches nobody is dropped (its process died).
local function heads(st, now, except)
  while st.nq > 0 and now >= st.qt do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head or head == except then return end
    local c, n = weight(head)
    if st.held + n > c then return end
    local ttl, push = string.match(redis.call('HGET', QX, head) or '0:0', '^(%d+):(%d)$')
    -- An asker that hears no push would learn of its grant only when it asks again, and a dead
    -- one never: it is granted when it asks (within 10 ms), not here.
    if push ~= '1' then return end
    dequeue(st, head)
    local tok = math.max(st.tok + 1, now)
    -- (%d: a Lua number as text would be 1.7961e+15)
    local heard = redis.call('PUBLISH', P .. 'w:' .. string.match(head, '^[^.]*'), string.format('%s %d %d', head, tok, st.born))
    if heard > 0 then
      st.tok = tok
      lease(st, head, n, now + tonumber(ttl))
    end
  end
end

-- hint is how long a waiter may wait before asking again: until the next lease expiry (mexp is
-- at most that), queue-entry death or end of the pause, and at most a fifth of its heartbeat
-- (which keeps its own entry alive, with room for a starved process).
local function hint(st, now, hb)
  local t = now + math.max(math.floor(hb / 5), 1000)
  if st.held > 0 then t = math.min(t, st.mexp) end
  local q = redis.call('ZRANGE', QE, 0, 0, 'WITHSCORES')
  if q[2] then t = math.min(t, tonumber(q[2])) end
  if now < st.qt then t = math.min(t, st.qt) end
  return math.max(t - now, 100)
end

-- paused is the reply's view of the pause and of the longest TTL in use.
local function paused(st, now)
  local longest = 0
  if now < st.mttlx then longest = st.mttl end
  if now >= st.qt then return 0, 0, longest end
  return st.qt - now, st.why, longest
end

-- ask is an acquire on a loaded and purged state: granted at once, queued (if wait), or, asked
-- again, kept in its place and granted once it heads the queue and fits. An unheard request (no
-- push) is told to ask again within 10 ms. It saves the state and
-- returns the reply {granted, token or retry-in, epoch, paused, why, longest, queued, free}.
local function ask(st, now, member, ttl, wait, hb, push, seen)
  local c, n = weight(member)
  local exp = now + ttl
  if seen > st.tok then st.tok = seen end
  local function reply(granted, x)
    save(st)
    local p, why, lt = paused(st, now)
    return {granted, x, st.born, p, why, lt, st.nq, c - st.held}
  end
  local function grant()
    st.tok = math.max(st.tok + 1, now)
    local tok = st.tok -- (heads draws the tokens of the grants it pushes after it)
    lease(st, member, n, exp)
    heads(st, now, nil)
    return reply(1, tok)
  end
  if redis.call('ZSCORE', L, member) then return grant() end -- repeated after a lost reply or push
  local queued = st.nq > 0 and redis.call('ZSCORE', Q, member)
  if not queued then
    if st.nq == 0 and now >= st.qt and st.held + n <= c then return grant() end
    if not wait then
      heads(st, now, nil)
      return reply(0, hint(st, now, hb))
    end
    redis.call('ZADD', Q, (redis.call('HINCRBY', M, 'seq', 1)), member)
    st.nq = st.nq + 1
  end
  redis.call('ZADD', QE, (now + hb), member)
  redis.call('HSET', QX, member, string.format('%d:%s', ttl, push))
  if now >= st.qt and st.held + n <= c and redis.call('ZRANGE', Q, 0, 0)[1] == member then
    dequeue(st, member)
    return grant()
  end
  heads(st, now, member)
  local h = hint(st, now, hb)
  -- Nobody grants an unheard request but its own ask (see heads): it asks again soon, as it
  -- may hold up the queue behind it.
  if push ~= '1' then h = math.min(h, 10000) end
  return reply(0, h)
end
`

// acquire: KEYS m l q qe qx; ARGV member, ttl, wait (0/1), heartbeat, push (0/1), seen, longest.
// Returns {granted (0/1), token or retry-in, epoch, paused, why, longest, queued, free} (see ask).
// Asked again for a member it granted (a reply or a push was lost), it grants the same lease
// again: the same weight, a new expiry and a new token (the old one may never have reached
// anyone).
var acquireScript = redis.NewScript(acquireScriptSrc)

const acquireScriptSrc = `
local M, L, Q, QE, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local member, ttl, wait = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local hb, push, seen, longest = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', M, 'born', 'qt', 'tok', 'held', 'nq', 'mexp', 'rchk', 'mttl')
local born, qt, tok = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
local held, nq, mexp = tonumber(v[4]) or 0, tonumber(v[5]) or 0, tonumber(v[6]) or 0
local rchk, mttl = tonumber(v[7]) or 0, tonumber(v[8]) or 0
local c, n = string.match(member, ':(%d+):(%d+)$')
c, n = tonumber(c), tonumber(n)
local exp = now + ttl
-- Uncontended: a state trusted within the last millisecond (see rchk), nobody queued, no pause,
-- no lease that may have expired, the longest TTL unchanged, and it fits. mttlx (until when a
-- lease of the longest TTL may live) becomes exp without being read: every script that set it
-- ran at rchk or before with this same TTL, so exp is no earlier.
if born and nq == 0 and now >= qt and (held == 0 or now < mexp) and held + n <= c
    and now >= rchk and now - rchk < 1000 and ttl == mttl then
  tok = math.max(tok + 1, now, seen + 1)
  if redis.call('ZADD', L, 'NX', exp, member) == 0 then
    redis.call('ZADD', L, exp, member)
    redis.call('HSET', M, 'tok', tok, 'mttlx', exp, 'rchk', now)
    return {1, tok, born, 0, 0, mttl, 0, c - held}
  end
  if held == 0 or exp < mexp then mexp = exp end
  redis.call('HSET', M, 'tok', tok, 'held', held + n, 'mexp', mexp, 'mttlx', exp, 'rchk', now)
  return {1, tok, born, 0, 0, mttl, 0, c - held - n}
end
` + slow + `
local st = load(now, ttl, longest, true)
purge(st, now)
return ask(st, now, member, ttl, wait, hb, push, seen)
`

// release: KEYS m l q qe qx; ARGV count, count members, then, to acquire in the same call, the
// acquire script's ARGV. Removes each member's lease and queue entry, grants the queue's heads
// that fit now, then makes the acquire (after them: it never passes anyone). Returns {removed}
// or {removed, the acquire's reply...}.
var releaseScript = redis.NewScript(releaseScriptSrc)

const releaseScriptSrc = `
local M, L, Q, QE, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local count = tonumber(ARGV[1])
local removed, freed = 0, 0
for i = 2, count + 1 do
  if redis.call('ZREM', L, ARGV[i]) == 1 then
    removed = removed + 1
    freed = freed + tonumber(string.match(ARGV[i], ':(%d+)$'))
  end
end
local then_ = #ARGV > count + 1
local v = redis.call('HMGET', M, 'born', 'held', 'nq')
if not then_ then
  if not v[1] then return {removed} end -- no state (lost): nothing is counted, nothing to do
  if (tonumber(v[3]) or 0) == 0 then -- nobody queued: nobody to grant
    if freed > 0 then redis.call('HSET', M, 'held', (tonumber(v[2]) or 0) - freed) end
    return {removed}
  end
end
` + slow + `
local now = clock()
local a = count + 2
local member, ttl, wait, hb, push, seen, longest
if then_ then
  member, ttl, wait = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
  hb, push, seen, longest = tonumber(ARGV[a + 3]), ARGV[a + 4], tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
end
local st = load(now, ttl or 0, longest or 0, then_)
if v[1] then st.held = st.held - freed end -- a state made just now counts nothing of before
for i = 2, count + 1 do
  if redis.call('ZREM', Q, ARGV[i]) == 1 then
    redis.call('ZREM', QE, ARGV[i])
    redis.call('HDEL', QX, ARGV[i])
    st.nq = st.nq - 1
  end
end
purge(st, now)
heads(st, now, nil)
if not then_ then
  save(st)
  return {removed}
end
local r = ask(st, now, member, ttl, wait, hb, push, seen)
table.insert(r, 1, removed)
return r
`

// renew: KEYS m l q qe qx; ARGV ttl, seen, longest, count, then member, token, epoch for each of
// count leases, then member, token for each lease to register whatever the capacity. Returns
// {epoch, paused, why, longest, status...}, status 1 renewed, 2 registered (again: granted in an
// earlier epoch, and it fits; or granted while the backend was unreachable), 0 lost.
var renewScript = redis.NewScript(`
local M, L, Q, QE, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
` + slow + `
local ttl, seen, longest, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = clock()
local st = load(now, ttl, longest, true)
if seen > st.tok then st.tok = seen end
purge(st, now)
local out = {}
local exp = now + ttl
local last = 4 + 3 * count
for i = 5, last, 3 do
  local m, tok, ep = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local r = 0
  if redis.call('ZADD', L, 'XX', 'CH', exp, m) == 1 or redis.call('ZSCORE', L, m) then
    r = 1
  elseif ep ~= st.born then
    local c, n = weight(m)
    if st.held + n <= c then
      lease(st, m, n, exp)
      if tok > st.tok then st.tok = tok end
      r = 2
    end
  end
  out[#out + 1] = r
end
for i = last + 1, #ARGV, 2 do
  local m, tok = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('ZADD', L, 'XX', 'CH', exp, m) == 1 or redis.call('ZSCORE', L, m) then
    out[#out + 1] = 1
  else
    local _, n = weight(m)
    lease(st, m, n, exp)
    if tok > st.tok then st.tok = tok end
    out[#out + 1] = 2
  end
end
heads(st, now, nil)
save(st)
local p, why, lt = paused(st, now)
local reply = {st.born, p, why, lt}
for _, r in ipairs(out) do reply[#reply + 1] = r end
return reply
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
