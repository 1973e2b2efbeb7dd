'use strict'

// The access log (--access-log): one line on stdout per client connection (tcp) or
// request (http), written when it ends. Listeners hold `accessLog` (null when off), and
// the two places where a connection or request ends call it only when it is not null,
// so an access log that is off costs one comparison: no record, no string, no Date.
//
// What ended hands over a plain record (TcpSession#record in tcp.js, Exchange#record in
// http/exchange.js), in this order:
//   { listener, protocol, client, backend, [method, target, version, status, host,
//     referer, userAgent,] bytesIn, bytesOut, ms }
// with method to userAgent for requests only (host, referer, userAgent: null when the
// request had none), and ms since it opened (unrounded); with --request-id, a request's
// record ends with its requestId. In http,
// status is what the client was answered (the backend's, or lila's own 502, 503, ...),
// 101 for an upgrade (logged when the tunnel closes) and 499 when the client went away
// before its response was complete and nothing of it had been sent. A response cut
// after it started (HAProxy's termination state SD, CD, PD) says who cut it, `cut`:
// 'backend' (it failed mid-response: a reset, a close, --timeout), 'client' (it left,
// or broke its request body) or 'lila' (compressing failed); text ` cut=WHO` after the
// status, json "cut", combined one more quoted field `"cut=WHO"` after the request ID's
// and the trace ID's (`"-"` for each absent). A complete response has none of these.
//
//   text: 2024-06-01T12:00:00.123Z 10.1.2.3 -> 10.0.0.1:80 "GET /a?b HTTP/1.1" 200 in=81 out=220 1.52ms
//         2024-06-01T12:00:00.123Z 10.1.2.3 -> 10.0.0.1:80 tcp in=2 out=20 35.10ms
//   json: {"time":"...","listener":"0.0.0.0:4444","protocol":"http","client":"10.1.2.3",
//          "backend":"10.0.0.1:80","method":"GET","target":"/a?b","version":"HTTP/1.1",
//          "status":200,"bytesIn":81,"bytesOut":220,"ms":1.52,"host":"example.com",
//          "referer":null,"userAgent":"curl/8.5.0"}
//   combined: the Combined Log Format of Apache and nginx, which log tools read (e.g.
//         goaccess --log-format=COMBINED), the time local with its offset, the size
//         the bytes sent to the client, quoted fields escaped as Apache does:
//         10.1.2.3 - - [01/Jun/2024:14:00:00 +0200] "GET /a?b HTTP/1.1" 200 220 "-" "curl/8.5.0"
//         a tcp connection: 10.1.2.3 - - [01/Jun/2024:14:00:00 +0200] "-" 200 20 "-" "-"
//         (200 when a backend took it, else 503)
//   With --request-id, the ID ends the line: text ` id=ID`; combined one more quoted
//   field, `"ID"`, where nginx configs put $request_id (log tools that read COMBINED
//   ignore what follows the user agent); json the record's "requestId". With --trace,
//   the trace ID after it: text ` trace=ID`; combined one more quoted field (after
//   `"-"` for the request ID when there is none); json "traceId". A request a route
//   (--route) served has the route's name in json's "route".
//
// The backend is "-" (json: null) when no backend took it. The json line is the record
// as it came, after the time. Lines are gathered and written once per turn of the event
// loop, so a busy listener costs one write per turn, not per line.

function createAccessLog ({ format = 'text', stdout = process.stdout } = {}) {
  let pending = ''
  let scheduled = false

  function flush () {
    scheduled = false
    if (pending === '') return
    const text = pending
    pending = ''
    try {
      stdout.write(text)
    } catch {} // a closed stdout must not take the balancer down
  }

  function write (line) {
    pending += line
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }

  const json = format === 'json'
  const combined = format === 'combined'

  return {
    // One connection or request that ended: its record (see above).
    log (record) {
      if (combined) return write(combinedLine(record, new Date()))
      const ms = round(record.ms)
      const time = new Date().toISOString()
      if (json) return write(JSON.stringify({ time, ...record, ms }) + '\n')
      let what = record.protocol // a connection: "tcp"
      if (record.method !== undefined) {
        const request = `${record.method} ${record.target} ${record.version}`.replace(/[\\"]/g, c => `\\${c}`)
        what = `"${request}" ${record.status}`
        if (record.cut !== undefined) what += ` cut=${record.cut}`
      }
      const { client, backend, bytesIn, bytesOut } = record
      let ids = record.requestId === undefined ? '' : ` id=${record.requestId}`
      if (record.traceId !== undefined) ids += ` trace=${record.traceId}`
      write(`${time} ${client} -> ${backend || '-'} ${what} in=${bytesIn} out=${bytesOut} ${ms.toFixed(2)}ms${ids}\n`)
    },

    flush
  }
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const two = n => String(n).padStart(2, '0')

function combinedLine (record, date) {
  const offset = -date.getTimezoneOffset()
  const zone = `${offset < 0 ? '-' : '+'}${two(Math.floor(Math.abs(offset) / 60))}${two(Math.abs(offset) % 60)}`
  const time = `${two(date.getDate())}/${MONTHS[date.getMonth()]}/${date.getFullYear()}:` +
    `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())} ${zone}`
  const http = record.method !== undefined
  const request = http ? quoted(`${record.method} ${record.target} ${record.version}`) : '"-"'
  const status = http ? record.status : (record.backend ? 200 : 503)
  const referer = http && record.referer !== null ? quoted(record.referer) : '"-"'
  const agent = http && record.userAgent !== null ? quoted(record.userAgent) : '"-"'
  let id = record.requestId === undefined ? '' : ` ${quoted(record.requestId)}`
  if (record.traceId !== undefined) id = `${id || ' "-"'} ${quoted(record.traceId)}`
  if (record.cut !== undefined) id = `${id || ' "-"'}${record.traceId === undefined ? ' "-"' : ''} "cut=${record.cut}"`
  return `${record.client} - - [${time}] ${request} ${status} ${record.bytesOut} ${referer} ${agent}${id}\n`
}

// A double-quoted field as Apache writes one: \" and \\, and \xHH for every byte
// outside printable ASCII (a tab, UTF-8 read as latin1), so a line stays ASCII and a
// field cannot be mistaken for two.
function quoted (text) {
  return `"${text.replace(/[^ !#-[\]-~]/g, escapeByte)}"`
}

function escapeByte (c) {
  if (c === '"' || c === '\\') return `\\${c}`
  return `\\x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`
}

function round (ms) {
  return Math.round(ms * 100) / 100
}

module.exports = { createAccessLog }
