'use strict'

// One response body compressed on its way (--compress): Node's zlib, gzip or brotli, at
// the levels LEVELS says. Streaming, not
// buffering: what is written is flushed soon after (once the writes of this turn of
// the event loop are in), so a server-sent event reaches the client as it happens.
// Back-pressure both ways, as a socket:
//
//   const c = new Compressor(encoding, { data, drain, end, error }, stats[, levels])
//   c.write(chunk)  -> false: hold the backend until drain() is called
//   c.end()         the body is done: the last bytes come, then end()
//   data(chunk)     compressed bytes for the client; return false when the client is
//                   full, then call c.resume() once it drained
//   c.destroy()     the client or backend went: the native stream is freed
//
// stats.compressed(encoding, bytesIn, bytesOut) counts what went through (EdgeStats).
// `levels` (LEVELS' shape) is for the bench, which tries others.

const { setImmediate } = require('timers')

// Chosen by measurement (bench/edge.js, bench/RESULTS-edge.md: CPU per MiB and ratio at
// every level, against nginx and Caddy). gzip 4, the first of zlib's lazy-matching
// levels: 11% fewer bytes than level 1 (nginx's default) and within 3% of level 5, for
// three quarters of level 5's CPU; about Caddy's default in both. brotli 4: 5% fewer
// bytes than gzip 4 for 1.7 times its CPU and 2.5 times its memory per stream; quality
// 5 would take 2.2 times and 4 times. A 256 KiB window (the default is 4 MiB) bounds a
// long stream's memory and costs little ratio on what a proxy sends.
const LEVELS = {
  gzip: { level: 4 },
  br: { quality: 4, window: 18 }
}
const HIGH_WATER = 64 * 1024

function createStream (encoding, levels) {
  const zlib = require('zlib') // loaded on the first compressed answer (ARCHITECTURE.md)
  if (encoding === 'gzip') {
    return zlib.createGzip({ level: levels.gzip.level, highWaterMark: HIGH_WATER, chunkSize: HIGH_WATER })
  }
  return zlib.createBrotliCompress({
    highWaterMark: HIGH_WATER,
    chunkSize: HIGH_WATER,
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: levels.br.quality,
      [zlib.constants.BROTLI_PARAM_LGWIN]: levels.br.window,
      [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT
    }
  })
}

const FLUSH = { gzip: 'Z_SYNC_FLUSH', br: 'BROTLI_OPERATION_FLUSH' } // names in zlib.constants

class Compressor {
  constructor (encoding, sink, stats, levels = LEVELS) {
    this.encoding = encoding
    this.sink = sink
    this.stats = stats
    this.stream = createStream(encoding, levels)
    this.flushing = false // a flush is scheduled for the end of this turn
    this.ended = false
    this.bytesIn = 0 // written since the last count
    this.stream.on('data', chunk => this.onData(chunk))
    this.stream.on('drain', () => this.sink.drain())
    this.stream.on('end', () => {
      this.count(0)
      this.sink.end()
    })
    this.stream.on('error', err => this.sink.error(err))
    this.flush = () => {
      this.flushing = false
      if (!this.ended && !this.stream.destroyed) this.stream.flush(require('zlib').constants[FLUSH[this.encoding]])
    }
  }

  write (chunk) {
    this.bytesIn += chunk.length
    if (!this.flushing) {
      this.flushing = true
      setImmediate(this.flush)
    }
    return this.stream.write(chunk)
  }

  end () {
    this.ended = true
    this.stream.end()
  }

  onData (chunk) {
    this.count(chunk.length)
    if (this.sink.data(chunk) === false) this.stream.pause()
  }

  resume () {
    this.stream.resume()
  }

  count (bytesOut) {
    this.stats.compressed(this.encoding, this.bytesIn, bytesOut)
    this.bytesIn = 0
  }

  destroy () {
    this.ended = true
    this.stream.destroy()
  }
}

module.exports = { Compressor, LEVELS }
