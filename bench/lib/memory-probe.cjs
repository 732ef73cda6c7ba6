'use strict';
/**
 * Loaded into an instance process by the leader-memory and scale benchmarks
 * (NODE_OPTIONS=--require): every BENCH_MEMORY_PROBE_MS (default 500) it forces a full collection
 * and prints the heap still in use after it, the live heap, as one stdout line:
 *   memory-probe {"at":<ms since epoch>,"liveHeap":<bytes>,"gcMs":<ms>}
 * The line does not start with "{", so the cluster's event parser passes over it. Forcing the
 * collections changes what the process's peaks would be, so the benchmark reads its peak heap
 * used and peak RSS from separate processes that run without this probe.
 *
 * The probe takes at most a tenth of the process's time: after a collection that took longer
 * than a tenth of the interval, the next waits ten times as long as that one took. On a starved
 * machine a full collection can take longer than the interval, and a fixed timer would then
 * leave the instance nothing but collections, so the run it measures would barely move.
 */
const v8 = require('node:v8');
const vm = require('node:vm');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
const every = Number(process.env.BENCH_MEMORY_PROBE_MS || 500);
const MAX_SHARE = 0.1;

function probe() {
  const t0 = performance.now();
  gc();
  const gcMs = performance.now() - t0;
  const { heapUsed } = process.memoryUsage();
  process.stdout.write(`memory-probe ${JSON.stringify({ at: Date.now(), liveHeap: heapUsed, gcMs })}\n`);
  setTimeout(probe, Math.max(every, gcMs / MAX_SHARE)).unref();
}
setTimeout(probe, every).unref();
