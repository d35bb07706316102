package redisfleet

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the node that holds the name's slot, reads the clock
// with TIME (Redis's clock decides every expiry), and purges what has expired before it decides.
// Times are microseconds.
//
// The state of a name (see keys.go) is a hash, s, of two fields. b holds, packed with
// struct.pack (a version byte, 1, then ten little-endian doubles, then a zero-terminated string),
// in this order: born (the epoch: when this state was created, or found to have gone back in
// time), qt (no new grants before it), why (the reason of that pause), tok (the last fencing
// token), nq, mexp, rchk (when a script last trusted the state), mttl and mttlx (the longest
// lease TTL seen, and until when a lease of it may live), seq (the arrival counter of the queue)
// and rid (the run ID of the server that last confirmed the state). h is held, plus F = 2^52
// while anyone is queued. struct.pack and struct.unpack write and read the numbers as they are
// (a double holds every integer below 2^53 exactly: microseconds until the year 2255), in a
// fraction of what text costs: Lua writes a number given to redis.call with '%.17g', and reads
// one with strtod, a few thousand instructions each, more than many a Redis command; measured,
// unpacking b costs a sixth of matching and converting twelve hexadecimal fields. h stands apart
// so that a release that finds nobody queued is one HINCRBY: no read, no decoding. Beside s: the
// sorted set l of leases by expiry, and the queue — q (members by arrival) and qx (member →
// "DEATH TTL PUSH": when its entry dies unless asked about again, the TTL of the lease it asks
// for, whether its asker listens for its grant).
// Invariants every script keeps:
//   - held is the summed weight of the members of l; so held == 0 exactly when l is empty.
//   - h is held + F exactly when nq > 0; b and h are written together, but for a release's
//     HINCRBY of h while nobody is queued.
//   - nq is the number of members of q; q and qx have the same members. An entry whose DEATH
//     has passed is dead: it is dropped when it reaches the head of the queue, and until then
//     it holds up nobody (only the head can be granted).
//   - mexp is, while held > 0, at most the earliest expiry in l (a lower bound: renewals and
//     releases only raise the earliest expiry, and each new lease lowers mexp to its own expiry
//     if that is earlier). While now < mexp no lease can have expired, and a script need not
//     look at l to purge it.
//   - A member is granted only from the head of q (or, with q empty, at once), only once
//     now >= qt, and only if held plus its weight stays within its capacity (the member is
//     "ID:CAPACITY:N": the scripts read both from it). A member is in l or in q, never both. A
//     queued member whose asker listens for pushes (PUSH 1) is granted only if the push reaches
//     a subscriber: PUBLISH counting nobody means its process died, and the queue moves on at
//     once; one that does not listen is granted only when its asker asks (it would never hear
//     of the grant).
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
// The uncontended paths come first and touch as little as they can (an Acquire: TIME, HMGET,
// ZADD and HSET; a Release with nobody queued: ZREM and HINCRBY); everything else is defined
// below them and only runs when needed.

// state is the codec of s, which every script needs first.
const state = `
local FMT = '<Bdddddddddds'
local F = 4503599627370496 -- 2^52: h is held + F while anyone is queued
`

// slow is the shared part of the scripts' slow paths: it loads, creates and purges the state,
// queues requests, grants the queue's heads when they fit, and says when a waiter should ask
// again.
const slow = `
local P = string.sub(S, 1, -2) -- "fleet:{NAME}:"

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

local function decode(raw, h)
  local held = tonumber(h)
  if not held or string.byte(raw) ~= 1 or string.byte(raw, -1) ~= 0 or #raw < 83 then return nil end
  local _, born, qt, why, tok, nq, mexp, rchk, mttl, mttlx, seq, rid = struct.unpack(FMT, raw)
  if nq > 0 then held = held - F end
  return {born = born, qt = qt, why = why, tok = tok, held = held, nq = nq, mexp = mexp, rchk = rchk,
          mttl = mttl, mttlx = mttlx, seq = seq, rid = rid}
end

local function save(st)
  local h = st.held
  if st.nq > 0 then h = h + F end
  redis.call('HSET', S, 'b', struct.pack(FMT, 1, st.born, st.qt, st.why, st.tok, st.nq, st.mexp, st.rchk,
                                         st.mttl, st.mttlx, st.seq, st.rid), 'h', h)
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

-- load reads the state (raw: s as the script found it). With create, a missing state — a new
-- name, or data lost in a restart — is created with a new epoch and admits nothing new for the
-- longest TTL that may be in use: leases granted before the loss may still run, and register
-- again on their next renewal within that time. A state confirmed by another server run may
-- have gone back in time: it gets a new epoch and the same pause, and its leases still count. A
-- longer TTL seen during the pause lengthens it.
local function load(now, ttl, longest, create, raw, h)
  local st = raw and (decode(raw, h) or error('redisfleet: the state of this name is not one the scripts wrote'))
  if not st then
    if not create then return nil end
    -- Anything left of an older state (a partial loss, as by eviction) is not counted: drop it.
    redis.call('DEL', L, Q, QX)
    st = {born = now, qt = now + math.max(ttl, longest, 1000000), why = 1, tok = 0, held = 0, nq = 0,
          mexp = 0, rchk = now, mttl = 0, mttlx = 0, seq = 0, rid = runid()}
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

-- purge drops expired leases.
local function purge(st, now)
  if st.held > 0 and now >= st.mexp then
    local dead = redis.call('ZRANGEBYSCORE', L, '-inf', now)
    if #dead > 0 then
      for _, m in ipairs(dead) do
        local _, n = weight(m)
        st.held = st.held - n
      end
      redis.call('ZREMRANGEBYSCORE', L, '-inf', now)
    end
    local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
    if #first == 0 then st.held, st.mexp = 0, 0 else st.mexp = tonumber(first[2]) end
  end
end

-- add counts a new lease of weight n expiring at exp (its ZADD is the caller's).
local function add(st, n, exp)
  if st.held == 0 or exp < st.mexp then st.mexp = exp end
  st.held = st.held + n
end

-- token draws the next fencing token.
local function token(st, now)
  st.tok = math.max(st.tok + 1, now)
  return st.tok
end

-- heads grants the head of the queue, and the next, while they fit and no pause holds, eight
-- entries a look. A member of mine (the members the call asks for: member → index) gets its
-- token in toks, for the reply; any other is pushed to its asker's instance, and one that
-- reaches nobody is dropped (its process died). Dead entries at the head are dropped. When a
-- live head stops the loop, st.hd is its entry's death: a waiter behind it asks again then.
local function heads(st, now, mine, toks)
  st.hd = nil
  while st.nq > 0 and now >= st.qt do
    local k = math.min(st.nq, 8)
    local hs = redis.call('ZRANGE', Q, 0, k - 1)
    if #hs == 0 then st.nq = 0 return end
    local xs = redis.call('HMGET', QX, unpack(hs))
    local gone, new = {}, {}
    local stop = false
    for i, h in ipairs(hs) do
      local death, ttl, push = string.match(xs[i] or '', '^(%x+) (%x+) (%d)$')
      death, ttl = tonumber(death or '0', 16), tonumber(ttl or '0', 16)
      local j = mine and mine[h]
      if death <= now then
        gone[#gone + 1] = h -- its process stopped asking about it
      else
        local c, n = weight(h)
        if st.held + n > c or (not j and push ~= '1') then
          st.hd, stop = death, true
          break
        end
        local tok = math.max(st.tok + 1, now)
        gone[#gone + 1] = h
        -- (%d: a Lua number as text would be 1.7961e+15)
        if j or redis.call('PUBLISH', P .. 'w:' .. string.match(h, '^[^.]*'),
                          string.format('%s %d %d', h, tok, st.born)) > 0 then
          st.tok = tok
          if j then toks[j] = tok end
          add(st, n, now + ttl)
          new[#new + 1] = now + ttl
          new[#new + 1] = h
        end
      end
    end
    if #gone > 0 then
      redis.call('ZREM', Q, unpack(gone))
      redis.call('HDEL', QX, unpack(gone))
      st.nq = st.nq - #gone
    end
    if #new > 0 then redis.call('ZADD', L, unpack(new)) end
    if stop or #hs < k then return end
  end
end

-- hint is how long a waiter may wait before asking again: until the next lease expiry (mexp is
-- at most that), the death of the entry that holds up the queue, or the end of the pause, and at
-- most a fifth of its heartbeat (which keeps its own entry alive, with room for a starved
-- process).
local function hint(st, now, hb)
  local t = now + math.max(math.floor(hb / 5), 1000)
  if st.held > 0 then t = math.min(t, st.mexp) end
  if st.hd then t = math.min(t, st.hd) end
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

-- ask is an acquire on a loaded and purged state, for the asker's member and, behind it in its
-- process, the members of a.behind (each waits there for its own grant): a member granted before
-- (a reply or push was lost) is granted again, with a new expiry and a new token; one queued
-- keeps its place and its entry lives on (one whose entry lapsed goes back to the tail, as a new
-- one); a new one is granted at once if nobody is queued and it fits, else queued at the tail, in
-- order. Then the queue's heads are granted as they fit: the
-- call's own members in the reply, others pushed. An asker that cannot wait (a.wait false) is
-- granted at once or not at all. It saves the state and returns the reply {granted, token or
-- retry-in, epoch, paused, why, longest, queued, free, then a token or 0 (queued) for each
-- member of a.behind}; an unheard request (no push) is told to ask again within 10 ms.
local function ask(st, now, a)
  local c = weight(a.member)
  if a.seen > st.tok then st.tok = a.seen end
  local exp = now + a.ttl
  local list, toks, mine = {a.member}, {0}, {}
  for i, m in ipairs(a.behind) do list[i + 1], toks[i + 1] = m, 0 end
  local queued = {}
  if st.nq > 0 then queued = redis.call('HMGET', QX, unpack(list)) end
  local entry = string.format('%x %x %s', now + a.hb, a.ttl, a.push)
  local open = st.nq == 0 and now >= st.qt -- nobody waits: grant in order while they fit
  local qadd, qset, new = {}, {}, {}
  for i, m in ipairs(list) do
    local death = queued[i] and tonumber(string.match(queued[i], '^%x+'), 16)
    if death then
      if death <= now then -- its entry lapsed (its process went quiet): back to the tail
        st.seq = st.seq + 1
        qadd[#qadd + 1] = st.seq
        qadd[#qadd + 1] = m
      end
      mine[m] = i
      qset[#qset + 1] = m
      qset[#qset + 1] = entry
    elseif redis.call('ZSCORE', L, m) then
      new[#new + 1] = exp
      new[#new + 1] = m
      toks[i] = token(st, now)
    else
      local mc, mn = weight(m)
      if open and st.held + mn <= mc then
        add(st, mn, exp)
        new[#new + 1] = exp
        new[#new + 1] = m
        toks[i] = token(st, now)
      elseif i > 1 or a.wait then
        open = false -- head-of-line: once one waits, those behind it queue after it
        st.seq = st.seq + 1
        st.nq = st.nq + 1
        qadd[#qadd + 1] = st.seq
        qadd[#qadd + 1] = m
        qset[#qset + 1] = m
        qset[#qset + 1] = entry
        mine[m] = i
      end
    end
  end
  if #new > 0 then redis.call('ZADD', L, unpack(new)) end
  if #qadd > 0 then redis.call('ZADD', Q, unpack(qadd)) end
  if #qset > 0 then redis.call('HSET', QX, unpack(qset)) end
  heads(st, now, mine, toks)
  save(st)
  local p, why, lt = paused(st, now)
  local r
  if toks[1] > 0 then
    r = {1, toks[1]}
  else
    local h = hint(st, now, a.hb)
    -- Nobody grants an unheard request but its own ask (see heads): it asks again soon, as it
    -- may hold up the queue behind it.
    if a.push ~= '1' then h = math.min(h, 10000) end
    r = {0, h}
  end
  for _, x in ipairs({st.born, p, why, lt, st.nq, c - st.held}) do r[#r + 1] = x end
  for i = 2, #list do r[#r + 1] = toks[i] end
  return r
end

-- request reads an acquire's ARGV from index i on: member, ttl, wait, heartbeat, push, seen
-- (hexadecimal), longest, then the members behind.
local function request(i)
  local a = {member = ARGV[i], ttl = tonumber(ARGV[i + 1]), wait = ARGV[i + 2] == '1', hb = tonumber(ARGV[i + 3]),
             push = ARGV[i + 4], seen = tonumber(ARGV[i + 5], 16), longest = tonumber(ARGV[i + 6]), behind = {}}
  for j = i + 7, #ARGV do a.behind[#a.behind + 1] = ARGV[j] end
  return a
end
`

// acquire: KEYS s l q qx; ARGV member, ttl, wait (0/1), heartbeat, push (0/1), seen (hex),
// longest, then the members of the asker's waiters behind it, in order. Returns {granted (0/1),
// token or retry-in, epoch, paused, why, longest, queued, free, a token or 0 per member behind}
// (see ask). Asked again for a member it granted (a reply or a push was lost), it grants the same
// lease again: the same weight, a new expiry and a new token (the old one may never have reached
// anyone).
var acquireScript = redis.NewScript(acquireScriptSrc)

const acquireScriptSrc = `
local S, L, Q, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member, ttl = ARGV[1], tonumber(ARGV[2])
` + state + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local hb = redis.call('HMGET', S, 'b', 'h')
local raw = hb[1]
local c, n = string.match(member, ':(%d+):(%d+)$')
c, n = tonumber(c), tonumber(n)
-- Uncontended: one member, a state trusted within the last millisecond (see rchk), nobody
-- queued, no pause, no lease that may have expired, the longest TTL unchanged, and it fits.
-- mttlx (until when a lease of the longest TTL may live) becomes exp without being read: every
-- script that set it ran at rchk or before with this same TTL, so exp is no earlier.
local held = tonumber(hb[2])
if raw and held and #ARGV == 7 and string.byte(raw) == 1 and string.byte(raw, -1) == 0 and #raw >= 83 then
  local _, born, qt, why, tok, nq, mexp, rchk, mttl, mttlx, seq, rid = struct.unpack(FMT, raw)
  if nq == 0 and now >= qt and (held == 0 or now < mexp) and held + n <= c
      and now >= rchk and now - rchk < 1000 and ttl == mttl then
    tok = math.max(tok + 1, now, tonumber(ARGV[6], 16) + 1)
    local exp = now + ttl
    if redis.call('ZADD', L, exp, member) == 1 then -- (0: granted before, now renewed)
      if held == 0 or exp < mexp then mexp = exp end
      held = held + n
    end
    redis.call('HSET', S, 'b', struct.pack(FMT, 1, born, qt, why, tok, nq, mexp, now, mttl, exp, seq, rid), 'h', held)
    return {1, tok, born, 0, 0, mttl, 0, c - held}
  end
end
` + slow + `
local a = request(1)
local st = load(now, a.ttl, a.longest, true, raw, hb[2])
purge(st, now)
return ask(st, now, a)
`

// release: KEYS s l q qx; ARGV count, count members, then, to acquire in the same call, the
// acquire script's ARGV. Removes each member's lease and queue entry, grants the queue's heads
// that fit now, then makes the acquire (after them: it never passes anyone). Returns {removed,
// queued, free} (the state after the call; free for the capacity of the first member) or
// {removed, queued, free, the acquire's reply...}.
var releaseScript = redis.NewScript(releaseScriptSrc)

const releaseScriptSrc = `
local S, L, Q, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local count = tonumber(ARGV[1])
` + state + `
local removed, freed, rest = 0, 0, {}
for i = 2, count + 1 do
  if redis.call('ZREM', L, ARGV[i]) == 1 then
    removed = removed + 1
    freed = freed + tonumber(string.match(ARGV[i], ':(%d+)$'))
  else
    rest[#rest + 1] = ARGV[i] -- not a lease: maybe a queue entry (a member is never both)
  end
end
local c = tonumber(string.match(ARGV[2], ':(%d+):%d+$'))
local then_ = #ARGV > count + 1
local lowered = not then_ and freed > 0
if lowered then
  local h = redis.call('HINCRBY', S, 'h', -freed)
  if h < 0 then -- no state (lost), and the increment made one: nothing is counted, nothing to do
    redis.call('DEL', S)
    return {removed, 0, c}
  end
  if h < F / 2 then return {removed, 0, c - h} end -- nobody queued: nobody to grant
end
local hb = redis.call('HMGET', S, 'b', 'h')
local raw = hb[1]
if not then_ and not raw then return {removed, 0, c} end -- no state (lost): nothing to do
` + slow + `
local now = clock()
local a
if then_ then a = request(count + 2) end
local st = load(now, a and a.ttl or 0, a and a.longest or 0, then_, raw, hb[2])
if raw and not lowered then st.held = st.held - freed end -- a state made just now counts nothing of before
if st.nq > 0 and #rest > 0 then -- the queue entries of waits given up
  local gone = redis.call('ZREM', Q, unpack(rest))
  if gone > 0 then
    redis.call('HDEL', QX, unpack(rest))
    st.nq = st.nq - gone
  end
end
purge(st, now)
heads(st, now, nil, nil)
if not then_ then
  save(st)
  return {removed, st.nq, c - st.held}
end
local r = ask(st, now, a)
local out = {removed, r[7], r[8]}
for _, x in ipairs(r) do out[#out + 1] = x end
return out
`

// renew: KEYS s l q qx; ARGV ttl, seen (hex), longest, count, then member, token (hex), epoch
// (hex) for each of count leases, then member, token (hex) for each lease to register whatever
// the capacity. Returns {epoch, paused, why, longest, status...}, status 1 renewed, 2 registered
// (again: granted in an earlier epoch, and it fits; or granted while the backend was
// unreachable), 0 lost.
var renewScript = redis.NewScript(`
local S, L, Q, QX = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
` + state + slow + `
local ttl, seen, longest, count = tonumber(ARGV[1]), tonumber(ARGV[2], 16), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = clock()
local hb = redis.call('HMGET', S, 'b', 'h')
local st = load(now, ttl, longest, true, hb[1], hb[2])
if seen > st.tok then st.tok = seen end
purge(st, now)
local out = {}
local exp = now + ttl
local last = 4 + 3 * count
for i = 5, last, 3 do
  local m, tok, ep = ARGV[i], tonumber(ARGV[i + 1], 16), tonumber(ARGV[i + 2], 16)
  local r = 0
  if redis.call('ZADD', L, 'XX', 'CH', exp, m) == 1 or redis.call('ZSCORE', L, m) then
    r = 1
  elseif ep ~= st.born then
    local c, n = weight(m)
    if st.held + n <= c then
      redis.call('ZADD', L, exp, m)
      add(st, n, exp)
      if tok > st.tok then st.tok = tok end
      r = 2
    end
  end
  out[#out + 1] = r
end
for i = last + 1, #ARGV, 2 do
  local m, tok = ARGV[i], tonumber(ARGV[i + 1], 16)
  if redis.call('ZADD', L, 'XX', 'CH', exp, m) == 1 or redis.call('ZSCORE', L, m) then
    out[#out + 1] = 1
  else
    local _, n = weight(m)
    redis.call('ZADD', L, exp, m)
    add(st, n, exp)
    if tok > st.tok then st.tok = tok end
    out[#out + 1] = 2
  end
end
heads(st, now, nil, nil)
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
