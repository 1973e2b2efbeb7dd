'use strict'

// What a balancer says about its listeners and routes (pure).

const { logsName } = require('../listener-names')

// "listening on 0.0.0.0:80 (http, round-robin, 2 backends)": a listener of a balancer,
// bound at `address`. `extra` ends the parentheses (the --workers primary's ", 4 workers").
function listeningOn (listener, address, extra = '') {
  const n = listener.upstream.backends.length
  const r = listener.routes.length
  const backends = `${plural(n, 'backend')}${r === 0 ? '' : `, ${plural(r, 'route')}`}`
  return `listening on ${address} (${listener.protocol.name}, ${listener.upstream.mode}, ${backends}${extra})`
}

// What lila says once a balancer listens (lb.listen() gave `addresses`): a line per
// listener, with its name when its other log lines have it.
function listeningLines (lb, addresses, extra) {
  return lb.listeners.map((listener, i) => {
    const name = logsName(listener.config, lb.listeners.length) ? `${listener.config.name}: ` : ''
    return name + listeningOn(listener, addresses[i], extra)
  })
}

// A route's match as written: api.example.com/v1, *.example.com, /static,
// /api header:x-canary=always.
function matchText ({ host, wildcard, path, condition = null }) {
  const place = `${host === null ? '' : (wildcard ? '*.' : '') + host}${path === null ? '' : path}`
  if (condition === null) return place
  const { kind, name, value } = condition
  return `${place}${place === '' ? '' : ' '}${kind}:${name}${value === null ? '' : `=${value}`}`
}

// "1 connection left to drain", "3 connections left to drain"
const leftToDrain = n => `${plural(n, 'connection')} left to drain`

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`

module.exports = { listeningOn, listeningLines, matchText, leftToDrain, plural }
