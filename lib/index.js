'use strict'

// The programmatic API: a normalised config (config/builder.js) in, running listeners out.
//   const lb = createBalancer(config, { log })
//   const addresses = await lb.listen()   // ['127.0.0.1:4444', ...]; listen(given): some
//                                         // on sockets given to the process (name -> socket)
//   lb.stats()                            // a fresh plain snapshot
//   const lines = await lb.reload(next)   // apply a new config; what changed, in words
//   lb.control({ op, ...request })        // one control action (admin/control.js)
//   lb.sockets()                          // the listening sockets (an upgrade hands them on)
//   lb.listeners, lb.config               // what runs, the config in force
//   await lb.close()                      // graceful: drains up to shutdownTimeout
//   lb.destroy()                          // cuts every connection
// lb.stats and lb.control may be passed on their own.
// Options: `now` (a clock), `resolve` (name -> Promise of addresses) and `resolveSrv`
// (SRV name -> Promise of records, as dns.resolveSrv gives them) replace Date.now and
// DNS, for tests; `random` (Math.random's kind) draws which requests a fault with a rate
// strikes. `via` is this lila's token in HTTP Via headers (loop detection). `table`
// false leaves out the start-up table (workers after the first print none).
// `accessLog` (access-log.js) writes a line per connection or request; by default the
// one config.accessLog asks for, on `stdout`; null: none. `fileLimit`: the limit on
// open files (descriptors.js). `tracer` (telemetry/tracer.js, --otlp): the spans its
// listeners make; null: none.
// `provisions` (balancer/provisions.js): what the listeners are served with besides the
// config, the files it names read, the certificates lila gets itself (--tls
// local|acme) and --fleet; by default this balancer's own, with a keeper of its own
// when a config wants one (`keeperOptions` go to it; tests: a short localLifetime) and
// no fleet. lila's command line gives one with the fleet; a --workers worker one fed
// by the primary's keeper.

const { Balancer } = require('./balancer/balancer')
const { listeningLines } = require('./balancer/words')

const createBalancer = (config, options) => new Balancer(config, options)

module.exports = { createBalancer, listeningLines }
