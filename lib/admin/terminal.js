'use strict'

const { frame } = require('./dashboard')
const { totals, rates } = require('./dashboard-rows')
const { createView, parseKeys, handleKey } = require('./dashboard-keys')

// The live terminal view's thin I/O half: it owns the terminal while it runs (the
// alternate screen, raw keys, a hidden cursor) and gives it back as it found it on
// stop(), on quit and when the process exits. Every second, after each key and when
// the terminal is resized, it takes a snapshot and redraws at the terminal's size;
// keys become control requests. Log lines are kept while it runs (they would tear the
// table) and shown under it, then written out on stop so nothing said is lost.
//
//   const view = startDashboard({ stats, control, input, output, onQuit, exitEvents, env })
//   view.logSink   a stream-like { write(text) } to give the logger while it runs
//   view.stop()    restore the terminal, write out the log lines kept

const REDRAW_MS = 1000
const LOG_KEPT = 200

function startDashboard ({
  stats, control, input, output, onQuit, exitEvents = null, version = '', interval = REDRAW_MS, env = process.env
}) {
  let view = createView()
  const colour = wantsColour(env, output)
  let snapshot = null
  let before = null
  let beforeAt = 0
  let perSecond = new Map()
  let stopped = false
  let drawing = false
  let again = false
  const log = []
  let partial = ''

  const logSink = {
    write (text) {
      partial += text
      const lines = partial.split('\n')
      partial = lines.pop()
      for (const line of lines) log.push(line)
      if (log.length > LOG_KEPT) log.splice(0, log.length - LOG_KEPT)
      return true
    }
  }

  const interactive = Boolean(input && input.isTTY && typeof input.setRawMode === 'function')
  output.write('\x1b[?1049h\x1b[?25l') // alternate screen, cursor hidden
  if (interactive) {
    input.setRawMode(true)
    input.setEncoding('utf8')
    input.on('data', onData)
    input.resume()
  }
  const onResize = () => draw()
  output.on('resize', onResize)
  if (exitEvents !== null) exitEvents.once('exit', restore)
  const timer = setInterval(() => draw(true), interval)
  draw(true)

  // Take a snapshot (with `sample`, also a rate sample) and redraw; or redraw `given`,
  // one just taken. One at a time.
  async function draw (sample = false, given = null) {
    if (stopped) return
    if (drawing) {
      again = true
      return
    }
    drawing = true
    try {
      snapshot = given !== null ? given : await stats()
      const at = Date.now()
      if (sample) {
        const now = totals(snapshot)
        if (before !== null) perSecond = rates(before, now, at - beforeAt)
        before = now
        beforeAt = at
      }
      if (stopped) return
      const { lines, top, page } = frame(snapshot, view, {
        width: output.columns || 100,
        height: output.rows || 30,
        rates: perSecond,
        version,
        now: at,
        log: interactive ? log : [...log, 'keys need a terminal on stdin'].slice(-LOG_KEPT),
        colour
      })
      view = { ...view, top, page } // where the table is scrolled to, for the next frame and key
      output.write('\x1b[H' + lines.join('\x1b[K\r\n') + '\x1b[K\x1b[J')
    } catch (err) {
      view = { ...view, message: `cannot read stats: ${err.message}` }
    } finally {
      drawing = false
    }
    if (again) {
      again = false
      draw()
    }
  }

  // Keys are handled one after the other, each on a snapshot taken after the previous
  // one's change, so "+ +" typed fast adds two. That snapshot is the one drawn.
  const keys = []
  let pumping = false

  function onData (text) {
    keys.push(...parseKeys(text))
    if (!pumping) pump()
  }

  async function pump () {
    pumping = true
    while (keys.length > 0 && !stopped) {
      const key = keys.shift()
      if (snapshot === null) continue
      const { view: next, action } = handleKey({ ...view, message: '' }, key, snapshot)
      view = next
      if (action !== null && action.op === 'quit') {
        stop()
        onQuit()
        break
      }
      if (action !== null) {
        const { op, ...request } = action
        try {
          view = { ...view, message: (await control[op](request)).message }
          snapshot = await stats()
        } catch (err) {
          view = { ...view, message: err.message }
        }
      }
      draw(false, snapshot)
    }
    pumping = false
  }

  function restore () {
    if (interactive) {
      input.off('data', onData)
      try {
        input.setRawMode(false)
      } catch {}
      input.pause()
    }
    output.write('\x1b[?25h\x1b[?1049l') // cursor back, main screen back
  }

  function stop () {
    if (stopped) return
    stopped = true
    clearInterval(timer)
    output.off('resize', onResize)
    if (exitEvents !== null) exitEvents.off('exit', restore)
    restore()
    if (partial !== '') log.push(partial)
    for (const line of log) output.write(`${line}\n`)
  }

  return { logSink, stop }
}

// Colour unless NO_COLOR is set to anything (https://no-color.org), TERM is dumb, or
// the terminal says it has none (hasColors() also reads FORCE_COLOR).
function wantsColour (env, output) {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false
  if (env.TERM === 'dumb') return false
  return typeof output.hasColors === 'function' ? output.hasColors(env) : true
}

module.exports = { startDashboard, wantsColour }
