'use strict'

// An instance's stdout and stderr as whole lines on lila's own: each line is one write,
// so lines of several instances (and lila's access log) never mix mid-line. A line
// longer than MAX_LINE bytes is cut there and marked, and the rest of it dropped, never
// made into a line of its own. While lila's stream is full, the instance's pipe is not
// read (the app then blocks on its writes, as on a terminal).

const MAX_LINE = 64 * 1024
const CUT_MARK = ' [lila: line cut at 64 KiB]'
// The colours of the prefixes on a terminal, by instance number (as foreman and
// overmind do): cyan, yellow, green, magenta, blue, red.
const COLOURS = [36, 33, 32, 35, 34, 31]
const LAST_LINES = 10 // kept per instance, to say why it failed

// Bytes in, lines out: onLine(text, cut).
class LineReader {
  constructor (onLine) {
    this.onLine = onLine
    this.parts = []
    this.size = 0
    this.cut = false
  }

  push (chunk) {
    let start = 0
    let newline
    while ((newline = chunk.indexOf(10, start)) !== -1) {
      this.#take(chunk.subarray(start, newline))
      this.#flush()
      start = newline + 1
    }
    if (start < chunk.length) this.#take(chunk.subarray(start))
  }

  // The stream ended: a last line without its newline is a line.
  end () {
    if (this.size > 0 || this.cut) this.#flush()
  }

  #take (part) {
    if (this.cut) return
    const room = MAX_LINE - this.size
    if (part.length > room) {
      this.parts.push(part.subarray(0, room))
      this.size = MAX_LINE
      this.cut = true
      return
    }
    this.parts.push(part)
    this.size += part.length
  }

  #flush () {
    let text = this.parts.length === 1 ? this.parts[0].toString() : Buffer.concat(this.parts).toString()
    if (text.endsWith('\r')) text = text.slice(0, -1)
    const cut = this.cut
    this.parts = []
    this.size = 0
    this.cut = false
    this.onLine(text, cut)
  }
}

// Where an app's lines go: `stdout` and `stderr` (lila's), as text led by "app.2 | "
// (coloured when `colour`) or as JSON lines ({ time, app, instance, stream, line }).
// `app()` names the listener when there are several (asked per line: a reload may add
// or take away another app listener).
function createOutput ({ stdout, stderr, format = 'text', colour = false, app = () => null }) {
  const paused = new Set() // the instances' pipes, not read until lila's stream drains
  const onDrain = () => {
    for (const source of paused) source.resume()
    paused.clear()
  }
  for (const target of new Set([stdout, stderr])) {
    if (typeof target.on === 'function') target.on('drain', onDrain)
  }
  const prefixOf = (number, named) => {
    const name = named === null ? `app.${number}` : `${named}.${number}`
    return colour ? `\x1b[${COLOURS[(number - 1) % COLOURS.length]}m${name}\x1b[0m | ` : `${name} | `
  }
  const render = (number, stream, text, cut) => {
    const named = app()
    if (format === 'json') {
      const time = new Date().toISOString()
      const record = { time, app: named === null ? 'app' : named, instance: number, stream, line: text }
      if (cut) record.cut = true
      return `${JSON.stringify(record)}\n`
    }
    return `${prefixOf(number, named)}${text}${cut ? CUT_MARK : ''}\n`
  }
  return {
    // The lines of one instance's stream `source` ('stdout' or 'stderr'); `keep(text)`
    // hears each line (the last few are kept to say why an instance failed).
    follow (number, name, source, keep) {
      const target = name === 'stderr' ? stderr : stdout
      const reader = new LineReader((text, cut) => {
        keep(text)
        let flowing = true
        try {
          flowing = target.write(render(number, name, text, cut))
        } catch {}
        // (A stream without 'drain', as the logger's sink, is never waited for.)
        if (!flowing && typeof target.on === 'function' && !paused.has(source)) {
          paused.add(source)
          source.pause()
        }
      })
      source.on('data', chunk => reader.push(chunk))
      source.on('end', () => reader.end())
      source.on('error', () => {})
    }
  }
}

// The last few lines an instance printed, to say why it failed.
class LastLines {
  constructor () {
    this.lines = []
  }

  add (text) {
    if (text.trim() === '') return
    this.lines.push(text.length > 200 ? `${text.slice(0, 200)}...` : text)
    if (this.lines.length > LAST_LINES) this.lines.shift()
  }

  // "; it printed: a | b | c", or nothing.
  said (count = 3) {
    const last = this.lines.slice(-count)
    if (last.length === 0) return ''
    return `; its last ${last.length === 1 ? 'line' : `${last.length} lines`}: ${last.join(' | ')}`
  }
}

module.exports = { LineReader, createOutput, LastLines, MAX_LINE }
