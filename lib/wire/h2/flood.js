'use strict'

// A connection's flood accounting (RFC 9113 10.5; the floods and their limits:
// docs/http2.md): what a peer makes lila do for nothing, counted against the work it
// brings, each past its limit a connection error ENHANCE_YOUR_CALM. The counters decay
// (sweep) so that a long connection is judged on its recent past.

const { ENHANCE_YOUR_CALM, connectionError } = require('./constants')

class Flood {
  constructor (options) {
    this.options = options // the connection's: maxGlitches, maxRapidResets, maxRefused, maxControlBacklog
    this.glitches = 0
    this.work = 0 // frames of real work (requests in, heads and DATA out), two each
    this.opened = 0
    this.earlyResets = 0
    this.refused = 0
    this.controlBacklog = 0
  }

  // Real work: a head or a DATA frame sent.
  worked () {
    this.work += 2
  }

  // A stream opened.
  streamOpened () {
    this.opened++
    this.work += 2
  }

  // A frame that did no work (the flood of them is the attack). Real work earns some: a
  // peer's PINGs (gRPC's BDP probes), WINDOW_UPDATEs and SETTINGS follow the DATA and
  // heads lila sends it, so a busy connection makes many and is no flood; a connection
  // that makes nothing else is.
  glitch () {
    if (++this.glitches > this.options.maxGlitches + this.work) {
      throw connectionError(ENHANCE_YOUR_CALM, 'too many frames that do nothing')
    }
  }

  // CVE-2023-44487: streams opened and reset before their answer, most of a
  // connection's streams, end it (Envoy's rule).
  earlyReset () {
    if (++this.earlyResets >= this.options.maxRapidResets && this.earlyResets * 2 > this.opened) {
      throw connectionError(ENHANCE_YOUR_CALM, 'streams reset as they open')
    }
  }

  // A stream refused over SETTINGS_MAX_CONCURRENT_STREAMS.
  refuse () {
    if (++this.refused > this.options.maxRefused) throw connectionError(ENHANCE_YOUR_CALM, 'too many streams refused')
  }

  // An answer the peer's frames asked for (an ack, a reset): on a peer that does not
  // read (the transport congested), they pile up.
  answered (congested) {
    if (congested && ++this.controlBacklog > this.options.maxControlBacklog) {
      throw connectionError(ENHANCE_YOUR_CALM, 'answers the peer does not read')
    }
  }

  // The transport took all it was given.
  drained () {
    this.controlBacklog = 0
  }

  sweep () {
    this.glitches >>>= 1
    this.refused >>>= 1
    this.earlyResets >>>= 1
    this.opened >>>= 1
    this.work >>>= 1
  }
}

module.exports = { Flood }
