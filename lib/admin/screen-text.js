'use strict'

// Text on a terminal's lines, for the dashboard (pure): lines wrapped, cut or capped to
// a width, the width of text with ANSI colour codes in it, columns padded.

// ANSI codes the dashboard paints with.
const DIM = '\x1b[90m'
const ALARM = '\x1b[1;31m'
const FG_DEFAULT = '\x1b[39m'
const INVERSE = '\x1b[7m'
const RESET = '\x1b[0m'
const BOLD = '\x1b[1m'

// `text` in lines of at most `width`, broken at spaces (a word too long is cut up);
// lines after the first are indented by `indent`.
function wrap (text, width, indent = '  ') {
  if (indent.length >= width / 2) indent = ''
  const lines = []
  let line = ''
  for (const word of text.split(' ')) {
    const start = lines.length === 0 ? '' : indent
    const candidate = line === '' ? start + word : `${line} ${word}`
    if (candidate.length <= width) {
      line = candidate
      continue
    }
    if (line !== '') lines.push(line)
    line = (lines.length === 0 ? '' : indent) + word
    while (line.length > width) {
      lines.push(line.slice(0, width))
      line = indent + line.slice(width)
    }
  }
  lines.push(line)
  return lines
}

// At most `max` lines; the last one shown says, with "…", that there was more.
function cap (lines, max, width) {
  if (lines.length <= max) return lines
  const kept = lines.slice(0, max)
  const last = kept[max - 1]
  kept[max - 1] = last.length < width ? last + '…' : last.slice(0, width - 1) + '…'
  return kept
}

// `left` and `right` on one line of `width`, right-aligned when there is room.
function fit (left, width, right, colour) {
  const visible = stripAnsi(left).length
  const gap = width - visible - right.length
  return gap >= 1 ? left + ' '.repeat(gap) + right : truncate(colour ? left : stripAnsi(left), width)
}

function stripAnsi (text) {
  // eslint-disable-next-line no-control-regex -- ESC starts the colour codes to strip
  return text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
}

function truncate (text, width) {
  if (stripAnsi(text).length <= width) return text
  const plain = stripAnsi(text)
  return width <= 1 ? plain.slice(0, width) : plain.slice(0, width - 1) + '…'
}

const pad = (text, n) => text.length >= n ? text : text + ' '.repeat(n - text.length)
const lpad = (text, n) => text.length >= n ? text : ' '.repeat(n - text.length) + text

module.exports = { wrap, cap, fit, stripAnsi, truncate, pad, lpad, DIM, ALARM, FG_DEFAULT, INVERSE, RESET, BOLD }
