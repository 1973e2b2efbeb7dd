'use strict'

const { formatDuration } = require('../format')

// --max-rss and --max-age: is a ready instance over either? app.js looks every
// SAMPLE_EVERY ms and replaces one that is through a rolling restart of its own.
const SAMPLE_EVERY = 1000 // --max-rss, --max-age and staying up are looked at this often

// The roll a ready slot's instance is owed, as App#roll takes it: { reason, why },
// or null. Its RSS is read (/proc) only when --max-rss is given.
function overLimit (slot, { maxRss, maxAge }, now) {
  const instance = slot.instance
  const rss = maxRss === null ? null : instance.rss()
  if (rss !== null && rss > maxRss) {
    return { reason: 'max-rss', why: `app.${slot.number} uses ${megabytes(rss)}, over --max-rss ${megabytes(maxRss)}` }
  }
  if (maxAge !== null && now - instance.startedAt >= maxAge) {
    return { reason: 'max-age', why: `app.${slot.number} is older than --max-age ${formatDuration(maxAge)}` }
  }
  return null
}

function megabytes (bytes) {
  return `${Math.round(bytes / 1048576)} MB`
}

module.exports = { SAMPLE_EVERY, overLimit }
