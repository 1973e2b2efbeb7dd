'use strict'

const crypto = require('crypto')
const { ReplyError } = require('../wire/resp')

// The Lua scripts a fleet runs in Redis, each a whole decision in one round trip, clocked
// by Redis's TIME (one clock for the fleet, not each host's). Sent by EVALSHA, with EVAL
// when Redis does not have it (NOSCRIPT: a restarted or another Redis).

// GCRA (the generic cell rate algorithm): one number per client, the theoretical
// arrival time of its next request. KEYS[1] the client's; ARGV[1] ms between requests
// (1000 / rate), ARGV[2] the burst. -> 0: allowed (and counted), else ms until it
// would be.
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
if tat < now then tat = now end
local wait = tat + interval - interval * tonumber(ARGV[2]) - now
if wait > 0 then return math.ceil(wait) end
redis.call('SET', KEYS[1], string.format('%.3f', tat + interval), 'PX', math.ceil(tat + interval - now) + 1)
return 0`

// A run-time change kept and published in one step, numbered: KEYS[1] the hash of the
// last change per backend, KEYS[2] the counter, KEYS[3] the channel; ARGV[1] the field,
// ARGV[2] the change (JSON). What is kept and sent is "SEQ JSON". -> SEQ
const SHARE = `
local seq = redis.call('INCR', KEYS[2])
local text = seq .. ' ' .. ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], text)
redis.call('PUBLISH', KEYS[3], text)
return seq`

// A member's announcement, and the members there are: KEYS[1] the set of members' IDs,
// KEYS[2] this member's key; ARGV[1] its announcement (JSON), ARGV[2] how long it lives
// (ms), ARGV[3] the keys' prefix. Members whose key expired leave the set.
// -> { JSON, PTTL, ... }
const ANNOUNCE = `
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[1], ARGV[4])
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[3] .. id
  local text = redis.call('GET', key)
  if text then
    out[#out + 1] = text
    out[#out + 1] = redis.call('PTTL', key)
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out`

// --max-conn-per-client for the fleet: KEYS[1] the client's hash of connections per
// member; ARGV[1] this member's ID, ARGV[2] the most allowed, ARGV[3] the members' key
// prefix. Counts of members gone (their key expired) are dropped. -> 1: counted, 0: full
const CONNECT = `
local total = 0
local counts = redis.call('HGETALL', KEYS[1])
for i = 1, #counts, 2 do
  if redis.call('EXISTS', ARGV[3] .. counts[i]) == 1 then
    total = total + tonumber(counts[i + 1])
  else
    redis.call('HDEL', KEYS[1], counts[i])
  end
end
if total >= tonumber(ARGV[2]) then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], 86400000)
return 1`

// A connection so counted is over: KEYS[1], ARGV[1] as CONNECT's.
const DISCONNECT = `
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0`

// Kept and published in one step: KEYS[1] a hash, KEYS[2] a channel; ARGV[1] the
// field, ARGV[2] its value, ARGV[3] the message.
const KEEP = `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], ARGV[3])
return 0`

// A lock kept by its holder only: KEYS[1] the lock, ARGV[1] the holder, ARGV[2] its
// expiry (ms). -> 1: still held
const RENEW_LOCK = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`

const RELEASE_LOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`

const SCRIPTS = { GCRA, SHARE, ANNOUNCE, CONNECT, DISCONNECT, KEEP, RENEW_LOCK, RELEASE_LOCK }
const SHAS = Object.fromEntries(Object.entries(SCRIPTS).map(([name, text]) =>
  [name, crypto.createHash('sha1').update(text).digest('hex')]))

// Run a script by its SHA1, or by its text when Redis lacks it.
function runScript (client, name, keys, args) {
  const tail = [keys.length, ...keys, ...args]
  return client.command(['EVALSHA', SHAS[name], ...tail]).catch(err => {
    if (!(err instanceof ReplyError) || err.prefix !== 'NOSCRIPT') throw err
    return client.command(['EVAL', SCRIPTS[name], ...tail])
  })
}

// The same with a callback (err, reply), no Promise: a request's decision.
function callScript (client, name, keys, args, callback) {
  const tail = [keys.length, ...keys, ...args]
  client.call(['EVALSHA', SHAS[name], ...tail], (err, reply) => {
    if (err === null || !(err instanceof ReplyError) || err.prefix !== 'NOSCRIPT' || !client.up) {
      return callback(err, reply)
    }
    client.call(['EVAL', SCRIPTS[name], ...tail], callback)
  })
}

// Load them all (a connection just made): later EVALSHAs find them.
function loadScripts (client) {
  return Promise.all(Object.values(SCRIPTS).map(text => client.command(['SCRIPT', 'LOAD', text])))
}

module.exports = { runScript, callScript, loadScripts }
