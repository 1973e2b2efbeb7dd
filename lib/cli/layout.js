'use strict'

// Text laid out for a terminal, as --help shows it: paragraphs wrapped between words,
// two-column tables whose text goes under the left column when the terminal is narrow,
// commands broken so that they still paste into a shell.

// The width help is wrapped to: the terminal's, 80 when it is not a terminal. Below 40
// nothing reads well; above 100 lines are too long to read, so wider terminals get 100.
const DEFAULT_WIDTH = 80
const MIN_WIDTH = 40
const MAX_WIDTH = 100
// A description column narrower than this goes under its left column instead of beside it.
const MIN_TEXT = 30
const NBSP = '\u00a0' // joins words that move to the next line together

function helpWidth (columns) {
  if (!Number.isInteger(columns) || columns <= 0) return DEFAULT_WIDTH
  return Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, columns))
}

// `text` in lines of at most `width` columns, broken between words only. A word longer
// than a line (the backend syntax at 40 columns) is broken where its syntax allows.
function wrap (text, width) {
  const lines = []
  let line = ''
  for (const word of text.split(' ').flatMap(w => splitWord(w, width))) {
    if (line === '') {
      line = word
    } else if (line.length + 1 + word.length <= width) {
      line += ` ${word}`
    } else {
      lines.push(line)
      line = word
    }
  }
  lines.push(line)
  return lines.map(l => l.replaceAll(NBSP, ' '))
}

// Break at a joined space or before "[", else after "," or "|", else at the width.
function splitWord (word, width) {
  const pieces = []
  while (word.length > width) {
    const at = breakAt(word, width, i => word[i] === NBSP || word[i] === '[') ||
      breakAt(word, width, i => word[i - 1] === ',' || word[i - 1] === '|') || width
    pieces.push(word.slice(0, at))
    word = word.slice(word[at] === NBSP ? at + 1 : at)
  }
  pieces.push(word)
  return pieces
}

// The last position up to `width` where `can(i)` allows a break, or 0.
function breakAt (word, width, can) {
  for (let i = width; i > 0; i--) if (can(i)) return i
  return 0
}

// `text` wrapped to `width`, each line led by `indent`.
function paragraph (text, width, indent = '') {
  return wrap(text, width - indent.length).map(l => indent + l)
}

// The width of a table's text column: beside a left column `leftWidth` wide, indented by
// two; or, when that leaves it too narrow, under it, indented by six (`under` true).
function textColumn (width, leftWidth) {
  const beside = width - 2 - leftWidth
  return beside >= MIN_TEXT ? { width: beside, under: false } : { width: width - 6, under: true }
}

// The left column's width that fits every row's left cell (rows with text only).
function leftColumn (rows) {
  return Math.max(...rows.filter(r => r[1]).map(([left]) => left.length)) + 2
}

// Two columns, [left, text] per row (see textColumn).
function table (rows, width, leftWidth = leftColumn(rows)) {
  const column = 2 + leftWidth
  const textWidth = textColumn(width, leftWidth)
  const out = []
  for (const [left, text = ''] of rows) {
    if (!textWidth.under) {
      const lines = wrap(text, textWidth.width)
      out.push(`  ${left.padEnd(leftWidth)}${lines[0]}`.trimEnd(), ...lines.slice(1).map(l => ' '.repeat(column) + l))
    } else {
      out.push(...wrap(left.trim(), width - 2).map(l => `  ${l}`))
      if (text) out.push(...wrap(text, textWidth.width).map(l => `      ${l}`))
    }
  }
  return out
}

// A command broken with " \" continuations, so that it still pastes into a shell; an
// option stays on the line of its value.
function command (text, width) {
  const room = width - 8 // the continuation's indent and " \"
  const units = text.split(/ (?=-)/).map(unit => unit.length <= room ? unit.replaceAll(' ', NBSP) : unit)
  const lines = wrap(units.join(' '), room)
  return lines.map((line, i) => `${i === 0 ? '  ' : '      '}${line}${i < lines.length - 1 ? ' \\' : ''}`)
}

module.exports = { helpWidth, wrap, paragraph, textColumn, table, command, NBSP }
