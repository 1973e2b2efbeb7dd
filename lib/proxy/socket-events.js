'use strict'

// Sockets get their event handlers from one table per kind of socket, as ws's
// addListeners does: the handlers are shared functions (`this` is the socket, which
// carries its owner), so a connection costs no closures, and the events a kind of
// socket listens to are listed once, in its table.
//   const CLIENT = handlers({ data () { this.session.onData(...) }, ... })
//   addListeners(socket, CLIENT)

// A frozen table of { event: handler }.
function handlers (table) {
  return Object.freeze(table)
}

function addListeners (emitter, table) {
  for (const event in table) emitter.on(event, table[event])
}

// The table's handlers off again: the socket goes to another owner (HTTP/2).
function removeListeners (emitter, table) {
  for (const event in table) emitter.off(event, table[event])
}

module.exports = { handlers, addListeners, removeListeners }
