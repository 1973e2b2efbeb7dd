'use strict'

// What a listener's rules at the edge did, counted for its snapshot, metrics and page:
// clients and requests refused, by reason, each reason said in a log line at most once
// a second (the others counted into the next line); and responses compressed, with the
// bytes that went in and came out, by coding. One per Listener, kept across reloads
// (the rules are compiled again; their counts go on).
//
//   stats.refused(reason, detail)            REASONS says the words and log level
//   stats.compressed(encoding, bytesIn, bytesOut)
//   stats.compressedResponse(encoding)
//   stats.forwardAuth('asked' | 'allowed' | 'cached')
//   stats.snapshot() -> { refused: { reason: n }, compression: { gzip: { responses, bytesIn, bytesOut } },
//                         forwardAuth: { asked, allowed, cached } }

const { throttled } = require('../../log')

// reason -> [log level, what the line says]. Asking for a password is the protocol's
// first step, not news: its lines are debug.
const REASONS = {
  allow: ['info', 'not on --allow'],
  deny: ['info', 'on --deny'],
  'no-credentials': ['debug', 'no credentials for --basic-auth'],
  'wrong-credentials': ['info', 'wrong user or password for --basic-auth'],
  'auth-busy': ['warn', 'too many password checks under way'],
  // --maintenance, POST /maintenance (proxy/maintenance.js): answered 503 with its page
  maintenance: ['debug', 'under maintenance'],
  // --forward-auth (forward-auth.js): its answer passed on, or a 503 for its failure
  'forward-auth': ['info', 'not let in by --forward-auth'],
  'forward-auth-failed': ['warn', 'answered 503 for --forward-auth'],
  // --tls-client-ca, in the TLS handshake (proxy/prelude.js)
  'client-cert-none': ['info', 'no client certificate (--tls-client-ca)'],
  'client-cert-untrusted': ['info', 'a client certificate --tls-client-ca did not sign']
}

class EdgeStats {
  constructor (log) {
    this.log = log
    this.counts = {}
    this.lines = new Map() // reason -> its throttled logger
    this.compression = {}
    this.forwardAuths = { asked: 0, allowed: 0, cached: 0 } // --forward-auth's questions
  }

  // `what`: asked (a question sent), allowed (its 2xx), cached (a 2xx remembered, not asked).
  forwardAuth (what) {
    this.forwardAuths[what]++
  }

  // `detail`: who, and where ("10.0.0.7", "10.0.0.7 on route admin"); `why`: more to say.
  refused (reason, detail, why = null) {
    this.counts[reason] = (this.counts[reason] || 0) + 1
    const [level, words] = REASONS[reason]
    if (!this.log.enabled(level)) return
    let say = this.lines.get(reason)
    if (say === undefined) {
      say = throttled(line => this.log[level](line))
      this.lines.set(reason, say)
    }
    say(`refused ${detail}: ${words}${why === null ? '' : `: ${why}`}`)
  }

  compressedResponse (encoding) {
    this.counter(encoding).responses++
  }

  compressed (encoding, bytesIn, bytesOut) {
    const counter = this.counter(encoding)
    counter.bytesIn += bytesIn
    counter.bytesOut += bytesOut
  }

  counter (encoding) {
    return (this.compression[encoding] ||= { responses: 0, bytesIn: 0, bytesOut: 0 })
  }

  snapshot () {
    const compression = {}
    for (const [encoding, c] of Object.entries(this.compression)) compression[encoding] = { ...c }
    return { refused: { ...this.counts }, compression, forwardAuth: { ...this.forwardAuths } }
  }
}

module.exports = { EdgeStats }
