//! The Lua scripts behind every decision that several replicas race for. Each runs atomically
//! in Redis. Node leases are tested with `EXISTS {node prefix}{node}`; holders and members are
//! stored as `node|rest`, split at the first `|` (node ids never contain one).

use redis::Script;

/// The frames of a script's ARGV from index `first` on (`id, bytes, mac` triples), appended to
/// the stream `key` (capped at `maxlen`, 0 = none), skipping those at or below its last id;
/// counts them in `added`. A Lua fragment shared by the scripts that append frames.
macro_rules! xadd_frames {
    () => {
        r#"
local added = 0
for i = first, #ARGV, 3 do
  local res
  if maxlen == '0' then
    res = redis.pcall('XADD', key, ARGV[i], 'f', ARGV[i + 1], 'm', ARGV[i + 2])
  else
    res = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, ARGV[i], 'f', ARGV[i + 1], 'm', ARGV[i + 2])
  end
  if type(res) == 'table' and res.err then
    if not string.find(res.err, 'equal or smaller', 1, true) then
      return redis.error_reply(res.err)
    end
  else
    added = added + 1
  end
end
"#
    };
}

/// Refuses (returns -1) when ARGV[i], a node id, is set and the run record names another node:
/// the run was taken over, and what its old node still writes must not reach its stream.
macro_rules! fence {
    ($i:literal) => {
        concat!(
            "\nif ARGV[",
            $i,
            "] ~= '' then\n  local holder = redis.call('HGET', KEYS[2], 'node_id')\n  if holder and holder ~= ARGV[",
            $i,
            "] then return -1 end\nend\n"
        )
    };
}

/// Appends frames, skipping those at or below the stream's last id, and notes the run's
/// progress on its record (when given and the record exists).
/// KEYS: frames stream, run record. ARGV: maxlen (0 = none), fence node ('' = none), progress
/// ('' = none), its MAC, then `id, bytes, mac` triples.
/// A stream created here copies the run record's remaining expiry (a finished run).
/// Returns how many frames were added, or -1 when fenced.
const APPEND_FRAMES: &str = concat!(
    fence!(2),
    r#"
local key = KEYS[1]
local maxlen = ARGV[1]
local fresh = redis.call('EXISTS', key) == 0
local first = 5
"#,
    xadd_frames!(),
    r#"
if fresh and added > 0 then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'progress', ARGV[3], 'progress_mac', ARGV[4])
end
return added
"#
);

/// Sets a run's status; finished: record and frames expire after the retention, else persist.
/// KEYS: run record, frames stream. ARGV: status, '1' when finished, retention ms.
/// Returns 0 when the record does not exist (nothing is created).
const SET_RUN_STATUS: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
if ARGV[2] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
end
return 1
"#;

/// A run's end in one step: appends its last frames (as [`APPEND_FRAMES`]), sets its final
/// status with the retention expiry (as [`SET_RUN_STATUS`]), and releases its chat's lock if the
/// run still holds it (as [`RELEASE_CHAT`]) — so whoever reads the terminal frame from Redis finds
/// the chat free. KEYS: frames stream, run record, chat lock. ARGV: maxlen (0 = none), status,
/// retention ms, run id, fence node ('' = none), then `id, bytes, mac` triples. Returns how
/// many frames were added, or -1 when fenced.
const FINISH_RUN: &str = concat!(
    fence!(5),
    r#"
local key = KEYS[1]
local maxlen = ARGV[1]
local first = 6
"#,
    xadd_frames!(),
    r#"if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'status', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
if redis.call('EXISTS', key) == 1 then
  redis.call('PEXPIRE', key, ARGV[3])
end
local v = redis.call('GET', KEYS[3])
if v then
  local sep = string.find(v, '|', 1, true)
  if sep and string.sub(v, sep + 1) == ARGV[4] then
    redis.call('DEL', KEYS[3])
  end
end
return added
"#
);

/// Sets one field of an existing hash. KEYS: hash. ARGV: field, value. Returns 0 when missing.
const HSET_IF_EXISTS: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"#;

/// Takes a chat's run lock. KEYS: lock. ARGV: node, run, node prefix.
/// Returns nil when taken (or already held by this run, whose node is then updated), else the
/// run id of the live holder.
const ACQUIRE_CHAT: &str = r#"
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, '|', 1, true)
  if sep then
    local node = string.sub(v, 1, sep - 1)
    local run = string.sub(v, sep + 1)
    if run ~= ARGV[2] and redis.call('EXISTS', ARGV[3] .. node) == 1 then
      return run
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2])
return false
"#;

/// Releases a chat's run lock if it is still held by the run. KEYS: lock. ARGV: run.
const RELEASE_CHAT: &str = r#"
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, '|', 1, true)
  if sep and string.sub(v, sep + 1) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
end
return 0
"#;

/// Enters a limited set. KEYS: set. ARGV: `node|member`, limit, node prefix.
/// Drops members of dead nodes, then adds when below the limit. Returns 1 when in, 0 when full.
const ENTER_LIMITED: &str = r#"
local count = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if m == ARGV[1] then return 1 end
  local sep = string.find(m, '|', 1, true)
  if sep == nil or redis.call('EXISTS', ARGV[3] .. string.sub(m, 1, sep - 1)) == 0 then
    redis.call('SREM', KEYS[1], m)
  else
    count = count + 1
  end
end
if count < tonumber(ARGV[2]) then
  redis.call('SADD', KEYS[1], ARGV[1])
  return 1
end
return 0
"#;

/// Counts a limited set's members of live nodes, dropping the others. KEYS: set.
/// ARGV: node prefix.
const COUNT_LIMITED: &str = r#"
local count = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local sep = string.find(m, '|', 1, true)
  if sep == nil or redis.call('EXISTS', ARGV[1] .. string.sub(m, 1, sep - 1)) == 0 then
    redis.call('SREM', KEYS[1], m)
  else
    count = count + 1
  end
end
return count
"#;

/// One hit in a fixed window. KEYS: counter. ARGV: window ms. Returns {count, ms left}.
const HIT_WINDOW: &str = r#"
local c = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if c == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {c, ttl}
"#;

/// INCRBY with an expiry set when the key is new. KEYS: counter. ARGV: amount, ttl ms (0: none).
const ADD_COUNTER: &str = r#"
local fresh = redis.call('EXISTS', KEYS[1]) == 0
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if fresh and ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v
"#;

/// Reserves against a limit. KEYS: counter, reservations hash. ARGV: `node|member`, amount,
/// limit, ttl ms (0: none), node prefix. Drops fields of dead nodes; grants when counter + the other live
/// reservations < limit, then sets the member's field (amount > 0). Returns {granted, spent,
/// held}.
const RESERVE: &str = r#"
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local held = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local m = all[i]
  local sep = string.find(m, '|', 1, true)
  if sep == nil or redis.call('EXISTS', ARGV[5] .. string.sub(m, 1, sep - 1)) == 0 then
    redis.call('HDEL', KEYS[2], m)
  elseif m ~= ARGV[1] then
    held = held + (tonumber(all[i + 1]) or 0)
  end
end
if spent + held >= tonumber(ARGV[3]) then
  return {0, spent, held}
end
if tonumber(ARGV[2]) > 0 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  if ARGV[4] ~= '0' and redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
end
return {1, spent, held}
"#;

/// One spend. KEYS: n counters, then reservation hashes. ARGV: n, ttl ms (0: none), `node|member`,
/// settled, then the n amounts. INCRBY each non-zero amount (expiry when new), then the
/// member's reservations lose `settled`, never below 0.
const SPEND: &str = r#"
local n = tonumber(ARGV[1])
for i = 1, n do
  local amount = ARGV[4 + i]
  if amount ~= '0' then
    local fresh = redis.call('EXISTS', KEYS[i]) == 0
    redis.call('INCRBY', KEYS[i], amount)
    if fresh and ARGV[2] ~= '0' then redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
  end
end
local settled = tonumber(ARGV[4])
if settled > 0 then
  for i = n + 1, #KEYS do
    local left = redis.call('HGET', KEYS[i], ARGV[3])
    if left then
      local v = tonumber(left) - settled
      if v < 0 then v = 0 end
      redis.call('HSET', KEYS[i], ARGV[3], v)
    end
  end
end
return 1
"#;

/// The scripts, hashed once per [`crate::Cluster`].
pub(crate) struct Scripts {
    pub(crate) append_frames: Script,
    pub(crate) finish_run: Script,
    pub(crate) set_run_status: Script,
    pub(crate) hset_if_exists: Script,
    pub(crate) acquire_chat: Script,
    pub(crate) release_chat: Script,
    pub(crate) enter_limited: Script,
    pub(crate) count_limited: Script,
    pub(crate) hit_window: Script,
    pub(crate) add_counter: Script,
    pub(crate) reserve: Script,
    pub(crate) spend: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            append_frames: Script::new(APPEND_FRAMES),
            finish_run: Script::new(FINISH_RUN),
            set_run_status: Script::new(SET_RUN_STATUS),
            hset_if_exists: Script::new(HSET_IF_EXISTS),
            acquire_chat: Script::new(ACQUIRE_CHAT),
            release_chat: Script::new(RELEASE_CHAT),
            enter_limited: Script::new(ENTER_LIMITED),
            count_limited: Script::new(COUNT_LIMITED),
            hit_window: Script::new(HIT_WINDOW),
            add_counter: Script::new(ADD_COUNTER),
            reserve: Script::new(RESERVE),
            spend: Script::new(SPEND),
        }
    }
}
