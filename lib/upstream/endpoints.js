'use strict'

const { formatAddress } = require('../address')

// A group's answer (membership.js) as the backends it stands for (pure):
//   endpointsOf(group, answer, onUnresolved) -> Map address -> { host, port, name, weight, backup }
// `answer`: the addresses of a name, the ports of a port range that listen (or of the
// app's instances that are ready), or the
// records of an SRV name (discovery.js watchService). onUnresolved(record, hosts): an
// SRV target that could not be resolved this time, and the hosts it keeps.
function endpointsOf (group, answer, onUnresolved) {
  if (group.srv) return srvEndpoints(group, answer, onUnresolved)
  return group.range !== null || group.app ? rangeEndpoints(group, answer) : nameEndpoints(group, answer)
}

// A name's addresses.
function nameEndpoints (group, addresses) {
  const { port, weight, backup } = group.spec
  return new Map(addresses.map(host => [formatAddress(host, port), { host, port, name: group.name, weight, backup }]))
}

// A port range's ports that listen; the app's that are ready.
function rangeEndpoints (group, ports) {
  const { host, weight, backup } = group.spec
  return new Map(ports.map(port => [formatAddress(host, port), { host, port, name: null, weight, backup }]))
}

// An SRV name's records: each address of each target is a backend; the records of the
// lowest priority are primaries, the others backups (lila has one tier of them). A
// weight of 0 counts as 1 (RFC 2782: the least chance, and an equal share when every
// record says 0). A target that could not be resolved this time (a timeout, not "no
// such name") keeps the backends it had.
function srvEndpoints (group, records, onUnresolved) {
  const wanted = new Map()
  const first = Math.min(...records.map(r => r.priority))
  for (const record of records) {
    const settings = {
      port: record.port,
      name: record.target,
      weight: record.weight === 0 ? 1 : record.weight,
      backup: group.spec.backup || record.priority > first,
      lowPriority: record.priority > first
    }
    const hosts = record.addresses !== null
      ? record.addresses
      : group.backends.filter(b => b.name === record.target && b.port === record.port).map(b => b.host)
    if (record.addresses === null) onUnresolved(record, hosts)
    for (const host of hosts) {
      const address = formatAddress(host, record.port)
      if (!wanted.has(address)) wanted.set(address, { host, ...settings })
    }
  }
  return wanted
}

module.exports = { endpointsOf }
