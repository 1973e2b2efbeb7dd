'use strict'

// The values of the second round of rules at the edge (pure): --forward-auth and its
// headers, --error-page, --maintenance, --canary and the names it reads. Text in, a
// checked value or a one-line UsageError out; parsers.js lists them among its own.

const { UsageError } = require('../errors')
const { TOKEN } = require('../proxy/message/grammar')
const { quote, forFlag } = require('./values')

const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/
// The settings that may follow a backend's address after a comma (backend-spec.js).
const BACKEND_SETTING = /^(weight|max-conn|slow-start)=|^backup$/
const SHARE = /^(\d{1,3}(?:\.\d+)?)%$/

const EDGE_PARSERS = {
  // --forward-auth: an http:// or https:// URL without credentials -> its href
  forwardAuth: (text, flag) => {
    let url = null
    try { url = new URL(text) } catch {}
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' ||
      url.password !== '' || url.hash !== '') {
      throw new UsageError(`invalid forward-auth URL ${quote(text)}${forFlag(flag)}: expected an http:// or ` +
        'https:// URL without credentials, e.g. http://127.0.0.1:9091/verify')
    }
    return url.href
  },
  // --forward-auth-copy: "Remote-User,Remote-Groups" -> the names, each once
  headerNames: (text, flag) => {
    const names = String(text).split(',').map(name => name.trim())
    const bad = names.find(name => !TOKEN.test(name))
    if (bad !== undefined) {
      throw new UsageError(`invalid header name ${quote(bad)}${forFlag(flag)}: ` +
        'expected header names separated by commas, e.g. Remote-User,Remote-Groups')
    }
    const seen = new Set()
    return Object.freeze(names.filter(name => !seen.has(name.toLowerCase()) && seen.add(name.toLowerCase())))
  },
  // --error-page: "502,503=/srv/5xx.html", "5xx=..." -> { codes: [502, 503], file }
  errorPage: (text, flag) => {
    const eq = String(text).indexOf('=')
    const invalid = expected =>
      new UsageError(`invalid error page ${quote(text)}${forFlag(flag)}: expected ${expected}`)
    if (eq <= 0 || eq === text.length - 1) throw invalid('CODES=FILE, e.g. 502,503,504=/srv/errors/5xx.html')
    const codes = new Set()
    for (const word of text.slice(0, eq).split(',')) {
      const w = word.trim()
      if (w === '4xx' || w === '5xx') {
        const from = w === '4xx' ? 400 : 500
        for (let code = from; code < from + 100; code++) codes.add(code)
      } else if (/^[45]\d\d$/.test(w)) {
        codes.add(Number(w))
      } else {
        throw invalid(`codes from 400 to 599 (or 4xx, 5xx) before the "=", got ${quote(w)}`)
      }
    }
    const file = text.slice(eq + 1)
    if (file.includes('\0')) throw invalid('a file name after the "="')
    return Object.freeze({ codes: Object.freeze([...codes].sort((a, b) => a - b)), file })
  },
  // --maintenance: on (lila's page, or the 503 --error-page), off, or a page's file ->
  // { page: FILE | null }, or null (off)
  maintenance: (text, flag) => {
    if (text === 'off') return null
    if (text === 'on') return Object.freeze({ page: null })
    if (text === '' || text.includes('\0')) {
      throw new UsageError(`invalid maintenance ${quote(text)}${forFlag(flag)}: expected on, off or a page's file`)
    }
    return Object.freeze({ page: text })
  },
  // --canary ':3100 :3101,weight=2 10%' (or, as a route's word, 10%,:3100,:3101):
  // backends and a share -> { backends: [text], share } (backends checked by the builder)
  canary: (text, flag) => {
    const invalid = expected => new UsageError(`invalid canary ${quote(text)}${forFlag(flag)}: expected ${expected}`)
    const backends = []
    let share = null
    for (const word of String(text).split(/[\s,]+/).filter(Boolean)) {
      const match = SHARE.exec(word)
      if (match !== null) {
        if (share !== null) throw invalid('one share, e.g. ":3100 10%"')
        share = Number(match[1])
        if (share > 100) throw invalid(`a share from 0% to 100%, got ${word}`)
      } else if (BACKEND_SETTING.test(word) && backends.length > 0) {
        backends[backends.length - 1] += `,${word}`
      } else {
        backends.push(word)
      }
    }
    if (share === null || backends.length === 0) {
      throw invalid('the canary\'s backends and the share of clients it gets, e.g. ":3100 :3101 10%"')
    }
    return Object.freeze({ backends: Object.freeze(backends), share })
  },
  cookieName: (text, flag) => {
    if (!COOKIE_NAME.test(text)) {
      throw new UsageError(`invalid cookie name ${quote(text)}${forFlag(flag)}: ` +
        'expected letters, digits, - _ . and the like (up to 64)')
    }
    return text
  },
  headerToken: (text, flag) => {
    if (!TOKEN.test(text) || text.length > 64) {
      throw new UsageError(`invalid header name ${quote(text)}${forFlag(flag)}: expected a header name, e.g. X-Canary`)
    }
    return text
  }
}

module.exports = { EDGE_PARSERS }
