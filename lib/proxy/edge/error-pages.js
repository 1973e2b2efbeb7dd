'use strict'

// --error-page CODES=FILE: lila's own answers (no backend, timeouts, 413, 429, ...)
// with a page of the user's, read at start and on every reload, and with
// --intercept-errors a backend's answers with those codes too; --maintenance's page.
// The status stays, and Retry-After; the body is the file, `{{request_id}}` and
// `{{trace_id}}` filled in (--request-id, --trace; empty without), its type by its
// extension (text/html otherwise). gRPC calls keep their trailers-only status.
//
//   readPage(file, readFile, what) -> a Page, or a UsageError naming the file
//   compilePages(config, loaded)   -> { own, routes: Map route name -> ErrorPages | null }:
//                                     the listener's pages, and each route's over them
//   pages.get(status) -> a Page, or undefined
//   page.type, page.render(ctx) -> Buffer   ctx: { requestId, traceId } (an exchange)

const fs = require('fs')
const path = require('path')
const { UsageError } = require('../../errors')

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.json': 'application/json',
  '.xml': 'application/xml',
  '.xhtml': 'application/xhtml+xml'
}
const PLACEHOLDER = /\{\{(request_id|trace_id)\}\}/g
const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;' }
const READ_REASONS = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'it is a folder' }
// A page is sent whole with every answer it serves: a bound on what a file may hold.
const MAX_PAGE = 1024 * 1024

// A page's bytes, split where the IDs go. Without placeholders, one Buffer sent as it is.
class Page {
  constructor (file, bytes) {
    this.file = file
    this.type = TYPES[path.extname(file).toLowerCase()] || TYPES['.html']
    const text = bytes.toString('utf8')
    const filled = text.includes('{{request_id}}') || text.includes('{{trace_id}}')
    this.whole = filled ? null : bytes
    this.parts = this.whole === null ? text.split(PLACEHOLDER) : null // text, name, text, name, ..., text
  }

  render (ctx) {
    if (this.whole !== null) return this.whole
    let out = ''
    for (let i = 0; i < this.parts.length; i++) {
      if (i % 2 === 0) out += this.parts[i]
      else out += escaped(this.parts[i] === 'request_id' ? ctx && ctx.requestId : ctx && ctx.traceId)
    }
    return Buffer.from(out)
  }
}

function escaped (value) {
  return value === null || value === undefined ? '' : String(value).replace(/[&<>"']/g, c => ESCAPES[c])
}

// `what` names the option in the error ("--error-page", "--maintenance").
function readPage (file, readFile = fs.readFileSync, what = '--error-page') {
  let bytes
  try {
    bytes = readFile(file)
  } catch (err) {
    throw new UsageError(`cannot read ${what} file ${JSON.stringify(file)}: ${READ_REASONS[err.code] || err.code}`)
  }
  if (bytes.length > MAX_PAGE) {
    throw new UsageError(`${what} file ${JSON.stringify(file)} is ${bytes.length} bytes: expected at most 1 MiB`)
  }
  return new Page(file, Buffer.from(bytes))
}

// Every page file of a listener and its routes, read once each: Map file -> Page.
function readPages (config, readFile) {
  const pages = new Map()
  for (const rules of [config, ...config.routes]) {
    for (const { file } of rules.errorPage || []) {
      if (!pages.has(file)) pages.set(file, readPage(file, readFile, '--error-page'))
    }
    const page = rules.maintenance && rules.maintenance.page
    if (page && !pages.has(page)) pages.set(page, readPage(page, readFile, '--maintenance'))
  }
  return pages
}

// status -> Page, for a pool: the listener's --error-page and, for a route, its own
// over them (later ones over earlier for a code given twice).
class ErrorPages {
  constructor (specs, read) {
    this.byStatus = new Map()
    for (const { codes, file } of specs) for (const code of codes) this.byStatus.set(code, read.get(file))
  }

  get (status) {
    return this.byStatus.get(status)
  }
}

function compilePages (config, loaded) {
  const read = loaded.pages
  const own = config.errorPage.length === 0 ? null : new ErrorPages(config.errorPage, read)
  const routes = new Map()
  for (const route of config.routes) {
    const specs = [...config.errorPage, ...route.errorPage]
    routes.set(route.name, specs.length === 0 ? null : new ErrorPages(specs, read))
  }
  return { own, routes }
}

module.exports = { readPage, readPages, compilePages }
