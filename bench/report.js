'use strict'

// The results as markdown: what ran where, then one table per workload, then the
// skipped contenders and the memory / start-up probes.

// The peers lila's CPU per request is read against, in column order; FLOOR stands for
// the Node floor of lila's own layer (node-tcp or node-http, peers/node-proxy.js).
const FLOOR = 'node floor'
const RATIO_PEERS = ['haproxy-tcp', 'haproxy-http', 'nginx-http', 'caddy', 'http-proxy', FLOOR]

function markdown ({ meta, workloads, cells, notes, probes }) {
  const out = []
  out.push('# lila benchmark results', '')
  out.push(`- Date: ${meta.date}`)
  out.push(`- Machine: ${meta.cpuModel}, ${meta.cores} cores, ${meta.kernel}`)
  out.push(`- Node: ${meta.node}`)
  out.push(`- Peers: ${meta.peers.join(', ')}`)
  out.push(`- lila: ${meta.lila}`)
  out.push(`- Run: ${meta.run}`)
  out.push(`- Pinning: balancer on CPU 0; load generator (${meta.loadgen}) and backends (${meta.backendKind}) on CPU 1`)
  if (meta.loadAverage) out.push(`- Machine load: ${meta.loadAverage}`)
  out.push('')
  out.push('**LB CPU µs/req** is the headline: CPU time (user+system) of the balancer\'s process tree ' +
    'during the measured interval divided by the requests completed. It depends little on what else the ' +
    'machine is doing; req/s and latency do. `÷ peer` columns are lila\'s LB CPU µs/req divided by that ' +
    'peer\'s in the same workload and balance mode (below 1: lila spends less CPU per request).')
  out.push('')

  out.push(...glance(workloads, cells))

  for (const w of workloads) {
    const rows = cells.filter(c => c.workload === w.id)
    if (!rows.some(c => c.status === 'ok')) continue
    out.push(`## ${w.id}: ${w.title}${w.backend === 'redis' ? '' : ` (${backendLabel(w.backend)} backends)`}`, '')
    if (w.backend === 'redis') {
      out.push(...redisTable(rows))
      continue
    }
    if (w.h2 || w.grpc) {
      out.push(...h2Table(rows, w))
      continue
    }
    out.push('| contender | balance | req/s | p50 ms | p99 ms | errors | share A/B | LB CPU % | load CPU % | **LB CPU µs/req** | ' +
      RATIO_PEERS.map(p => `÷ ${p}`).join(' | ') + ' |')
    out.push('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|' + RATIO_PEERS.map(() => '--:').join('|') + '|')
    for (const c of rows) {
      if (c.status !== 'ok') continue
      const ratios = RATIO_PEERS.map(peer => c.contender.startsWith('lila-') ? ratio(rows, c, peer) : '')
      out.push(`| ${c.contender} | ${c.mode} | ${Math.round(c.rps)} | ${c.p50Ms.toFixed(2)} | ${c.p99Ms.toFixed(2)} | ` +
        `${c.errors} | ${c.shares.map(s => `${Math.round(s * 100)}%`).join(' / ')} | ` +
        `${pct(c.lbCpuPct)} | ${pct(c.loadCpuPct)} | ` +
        `${c.lbCpuUsPerReq == null ? '—' : `**${c.lbCpuUsPerReq.toFixed(1)}**${noisy(c) ? ' †' : ''}`} | ${ratios.join(' | ')} |`)
    }
    out.push(...disturbedNote(rows), '')
  }

  // Contenders that did not run, once per contender and reason, with where.
  const missing = new Map()
  for (const c of cells) {
    if (c.status === 'ok') continue
    const key = `${c.contender} ${c.status}: ${c.reason}`
    if (!missing.has(key)) missing.set(key, [])
    const where = `${c.workload}${c.mode === 'rr' && !workloads.find(w => w.id === c.workload).modes.includes('lc') ? '' : ` ${c.mode}`}` +
      `${c.backendProtocol ? ` to ${c.backendProtocol}` : ''}`
    missing.get(key).push(where)
  }
  if (missing.size > 0) {
    out.push('## Not measured', '')
    for (const [key, where] of missing) out.push(`- ${key} (${where.join(', ')})`)
    out.push('')
  }

  if (notes.length > 0) {
    out.push('## Notes', '')
    for (const n of notes) out.push(`- ${n}`)
    out.push('')
  }

  if (probes) {
    out.push('## Memory and start-up', '')
    for (const line of probes) out.push(`- ${line}`)
    out.push('')
  }
  return out.join('\n')
}

function backendLabel (kind) {
  if (kind.startsWith('go/')) return `Go net/http, ${kind.slice(3, -1)} KiB writes,`
  return { nginx: 'nginx', go: 'Go net/http', node: 'Node', grpc: 'Go gRPC (grpc-go)' }[kind]
}

function disturbedNote (rows) {
  const disturbed = rows.filter(noisy)
  if (disturbed.length === 0) return []
  return ['', `† CPU 0 also ran other processes during this cell (${disturbed.map(c => `${c.contender} ${c.mode}: ` +
    `${Math.round(c.otherLbCpuPct)}%`).join(', ')} of the interval): the balancer shared its core, its figures are less reliable.`]
}

// R1: redis-benchmark's own figures per command, and throughput against HAProxy tcp and
// against redis hit directly, beside the CPU per request.
function redisTable (rows) {
  const out = ['| contender | GET req/s | SET req/s | req/s | p50 ms | p99 ms | share A/B | LB CPU % | load CPU % | ' +
    '**LB CPU µs/req** | ÷ haproxy-tcp | req/s ÷ haproxy-tcp | req/s ÷ direct |',
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|']
  for (const c of rows) {
    if (c.status !== 'ok') continue
    const lilaOnly = text => c.contender.startsWith('lila-') ? text : ''
    out.push(`| ${c.contender} | ${Math.round(c.tests.GET)} | ${Math.round(c.tests.SET)} | ${Math.round(c.rps)} | ` +
      `${c.p50Ms.toFixed(2)} | ${c.p99Ms.toFixed(2)} | ${c.shares.map(s => `${Math.round(s * 100)}%`).join(' / ')} | ` +
      `${pct(c.lbCpuPct)} | ${pct(c.loadCpuPct)} | ` +
      `${c.lbCpuUsPerReq == null ? '—' : `**${c.lbCpuUsPerReq.toFixed(1)}**${noisy(c) ? ' †' : ''}`} | ` +
      `${lilaOnly(ratio(rows, c, 'haproxy-tcp'))} | ${c.contender === 'direct' ? '' : rpsRatio(rows, c, 'haproxy-tcp')} | ` +
      `${c.contender === 'direct' ? '' : rpsRatio(rows, c, 'direct')} |`)
  }
  out.push(...disturbedNote(rows), '')
  out.push('p50 and p99 are the slower command\'s, as redis-benchmark measured them. redis-benchmark opens its 50 ' +
    'connections again for each command, so the tcp balancers choose a backend per connection, twice per interval.', '')
  return out
}

// HTTP/2 clients (H1) and gRPC calls (G1): the protocol to the backends beside the
// usual columns, ratios to the L7 peers that serve HTTP/2.
const H2_RATIO_PEERS = ['haproxy-http', 'nginx-http', 'caddy', FLOOR]

function h2Table (rows, w) {
  const out = ['| contender | to backends | req/s | p50 ms | p99 ms | errors | share A/B | LB CPU % | load CPU % | **LB CPU µs/req** | ' +
    H2_RATIO_PEERS.map(p => `÷ ${p}`).join(' | ') + ' |',
  '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|' + H2_RATIO_PEERS.map(() => '--:').join('|') + '|']
  for (const c of rows) {
    if (c.status !== 'ok') continue
    const ratios = H2_RATIO_PEERS.map(peer => c.contender.startsWith('lila-') || c.contender === 'h2-mux' ? ratio(rows, c, peer) : '')
    out.push(`| ${c.contender} | ${c.contender === 'direct' ? '—' : c.backendProtocol} | ${Math.round(c.rps)} | ` +
      `${c.p50Ms.toFixed(2)} | ${c.p99Ms.toFixed(2)} | ${c.errors} | ${c.shares.map(s => `${Math.round(s * 100)}%`).join(' / ')} | ` +
      `${pct(c.lbCpuPct)} | ${pct(c.loadCpuPct)} | ` +
      `${c.lbCpuUsPerReq == null ? '—' : `**${c.lbCpuUsPerReq.toFixed(1)}**${noisy(c) ? ' †' : ''}`} | ${ratios.join(' | ')} |`)
  }
  out.push(...disturbedNote(rows), '')
  if (w.grpc) {
    out.push('gRPC in the clear (h2c) both ways: lila-http runs as `lila --protocol grpc`, HAProxy `mode http` with ' +
      '`bind ... proto h2` and `server ... proto h2`, nginx `listen ... http2` with `grpc_pass grpc://be` (upstream ' +
      'keepalive). Requests are the calls ghz saw answered OK; errors, the calls that ended with another status; ' +
      'p50 and p99 are ghz\'s. Each call is a stream, balanced on its own.', '')
    return out
  }
  out.push('Clients speak HTTP/2 in the clear (h2c, prior knowledge: HAProxy `bind ... proto h2`, nginx `listen ... http2`); ' +
    'to backends HTTP/1.1 (h1) or h2c (h2: lila `--backend-protocol h2`, HAProxy `server ... proto h2`). ' +
    'Requests are h2load\'s answered 2xx; each stream is balanced on its own.', '')
  return out
}

// The same contender in the same workload, balance mode and protocol to the backends.
function peerOf (rows, c, peer) {
  return rows.find(r => r.contender === peer && r.mode === c.mode && r.backendProtocol === c.backendProtocol && r.status === 'ok')
}

// c's requests per second divided by `peer`'s in the same workload and mode, as "0.93×".
function rpsRatio (rows, c, peer) {
  const other = peerOf(rows, c, peer)
  if (!other || !other.rps || c.status !== 'ok' || c === other) return ''
  return `${(c.rps / other.rps).toFixed(2)}×`
}

// lila's LB CPU µs/req divided by `peer`'s in the same workload and mode, as "0.83×".
// FLOOR: the Node floor of c's layer (h2-mux, the codec pass-through: node-http's).
function ratio (rows, c, peer) {
  const floor = c.contender === 'h2-mux' ? 'node-http' : `node-${c.contender.slice('lila-'.length)}`
  const other = peerOf(rows, c, peer === FLOOR ? floor : peer)
  if (!other || !other.lbCpuUsPerReq || c.status !== 'ok' || c.lbCpuUsPerReq == null) return ''
  return `${(c.lbCpuUsPerReq / other.lbCpuUsPerReq).toFixed(2)}×`
}

// Other processes kept the balancer's CPU busy for more than this share of the
// interval: the cell is flagged (a shared machine; the balancer competed for its core).
const NOISY_OTHER_PCT = 10

function noisy (c) {
  return c.status === 'ok' && c.otherLbCpuPct != null && c.otherLbCpuPct > NOISY_OTHER_PCT
}

function pct (value) {
  return value == null ? '—' : `${Math.round(value)}%`
}

// The targets at a glance: lila against its same-layer peers, per workload and mode.
function glance (workloads, cells) {
  const out = ['## At a glance: LB CPU µs/request', '',
    '| workload | balance | lila-tcp | ÷ haproxy-tcp | ÷ node floor | lila-http | ÷ haproxy-http | ÷ nginx-http | ÷ caddy | ÷ node floor |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|']
  let any = false
  const redis = []
  for (const w of workloads) {
    const rows = cells.filter(c => c.workload === w.id)
    const variants = w.modes.flatMap(m => (w.backendProtocols || [undefined]).map(bp => [m, bp]))
    for (const [mode, backendProtocol] of variants) {
      const find = name => rows.find(r => r.contender === name && r.mode === mode &&
        r.backendProtocol === backendProtocol)
      const tcp = find('lila-tcp')
      const http = find('lila-http')
      if (!tcp && !http) continue
      any = true
      const us = c => !c ? '' : c.status !== 'ok' ? c.status : c.lbCpuUsPerReq.toFixed(1)
      // A workload with one protocol to the backends (G1: h2c) needs no label for it.
      const label = w.backendProtocols && w.backendProtocols.length > 1 ? `${w.id}, to ${backendProtocol}` : w.id
      const ratios = (c, peers) => peers.map(peer => c ? ratio(rows, c, peer) : '').join(' | ')
      out.push(`| ${label} | ${mode} | ${us(tcp)} | ${ratios(tcp, ['haproxy-tcp', FLOOR])} | ` +
        `${us(http)} | ${ratios(http, ['haproxy-http', 'nginx-http', 'caddy', FLOOR])} |`)
      if (w.backend === 'redis' && tcp && tcp.status === 'ok') {
        const peer = rpsRatio(rows, tcp, 'haproxy-tcp')
        const direct = rpsRatio(rows, tcp, 'direct')
        redis.push(`${w.id} requests/s: lila-tcp ${Math.round(tcp.rps)}` +
          `${peer ? `, ${peer} HAProxy tcp's` : ''}${direct ? `, ${direct} redis hit directly` : ''}.`)
      }
    }
  }
  if (redis.length > 0) out.push('', ...redis)
  return any ? [...out, ''] : []
}

module.exports = { markdown }
