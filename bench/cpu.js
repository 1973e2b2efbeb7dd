'use strict'

// CPU time and memory of a process tree, read from /proc.
//
// Why CPU time per request is the headline: on a shared 2-core box, requests/s moves
// with whatever else runs (and with the load generator, which shares a core with the
// backends), but the CPU the balancer itself burns for each request it forwards barely
// does: utime+stime counts only time the balancer's own threads were on a CPU, in
// user space and in the kernel on its behalf (its syscalls and the loopback TCP work
// done in its context).

const fs = require('fs')
const { execFileSync } = require('child_process')

let ticksPerSecond = 100
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
} catch {}

// Fields of /proc/PID/stat after the "(comm)" part, which may itself hold spaces.
function statFields (pid) {
  const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  return text.slice(text.lastIndexOf(')') + 2).split(' ')
}

// pid and its descendants (nginx master + worker, sh + exec'd program).
function processTree (pid) {
  const parentOf = new Map()
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      parentOf.set(Number(entry), Number(statFields(entry)[1]))
    } catch {} // gone meanwhile
  }
  const tree = [pid]
  for (let i = 0; i < tree.length && i < 1000; i++) {
    for (const [child, parent] of parentOf) if (parent === tree[i]) tree.push(child)
  }
  return tree
}

// utime+stime of the whole tree, in microseconds. Children are alive, so their time is
// in their own stat, not in the parent's cutime/cstime.
function treeCpuMicros (pid) {
  let micros = 0
  for (const m of treeCpuByProcess(pid).values()) micros += m
  return micros
}

// utime+stime of each process of the tree: Map pid -> microseconds (lila's --workers
// primary and its workers, each on its own).
function treeCpuByProcess (pid) {
  const byPid = new Map()
  for (const p of processTree(pid)) {
    try {
      const f = statFields(p)
      byPid.set(p, (Number(f[11]) + Number(f[12])) * 1e6 / ticksPerSecond) // utime, stime (fields 14 and 15)
    } catch {}
  }
  return byPid
}

// Resident set size of the tree in KiB (VmRSS from /proc/PID/status).
function treeRssKiB (pid) {
  let kib = 0
  for (const p of processTree(pid)) {
    try {
      const m = fs.readFileSync(`/proc/${p}/status`, 'utf8').match(/^VmRSS:\s+(\d+)\s+kB/m)
      if (m) kib += Number(m[1])
    } catch {}
  }
  return kib
}

// The tree's RSS once it has settled: what a process keeps, not what it has yet to give
// back. lila's idle collector (lib/cli/heap.js) returns a burst's garbage 8 to 11 s
// after it on a quiet machine, later on a busy one, so a reading taken at a fixed time
// may count that garbage as memory per connection. Read every second until the
// readings of the last `still` seconds are within `tolerance` (a share of the largest)
// of each other, or `max` seconds passed; the same wait for every process measured.
// Resolves with { kib, seconds, settled }.
async function settledRssKiB (pid, { still = 15, max = 90, tolerance = 0.005 } = {}) {
  const started = Date.now()
  const readings = [treeRssKiB(pid)]
  for (;;) {
    await new Promise(resolve => setTimeout(resolve, 1000))
    readings.push(treeRssKiB(pid))
    const last = readings.slice(-(still + 1))
    const high = Math.max(...last)
    const settled = last.length > still && high - Math.min(...last) <= tolerance * high
    const seconds = (Date.now() - started) / 1000
    if (settled || seconds >= max) return { kib: readings.at(-1), seconds, settled }
  }
}

// Busy and total jiffies per CPU from /proc/stat, to tell which side was saturated:
// busy% of the load generator's CPU near 100 means req/s was capped there, not by
// the balancer.
function cpuJiffies () {
  const result = []
  for (const line of fs.readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = line.match(/^cpu(\d+)\s+(.*)$/)
    if (!m) continue
    const v = m[2].trim().split(/\s+/).map(Number)
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0) // guest time is already in user
    result[Number(m[1])] = { busy: total - v[3] - v[4], total } // minus idle, iowait
  }
  return result
}

// Busy percentage of `cpu` between two cpuJiffies() snapshots.
function busyPercent (before, after, cpu) {
  if (!before[cpu] || !after[cpu]) return null
  const total = after[cpu].total - before[cpu].total
  return total > 0 ? 100 * (after[cpu].busy - before[cpu].busy) / total : null
}

module.exports = { treeCpuMicros, treeCpuByProcess, treeRssKiB, settledRssKiB, cpuJiffies, busyPercent }
