// make bench, fleet part (bench/fleet_bench.py): one of the Node processes of a fleet sharing
// one quota through bottleneck's Redis clustering, offered `rate` jobs a second from
// `start` (Unix ms) for `seconds`, each job recording when it starts (its proceed time).
//   node fleet_worker.js REDIS_PORT START_UNIX_MS SECONDS RATE OUT_FILE [MIN_TIME_MS]
// (MIN_TIME_MS: 1 for 1000/s; the bench's proof that bottleneck limits runs it at 10.)
// Writes "offered_us proceed_us" per started job (Unix µs) to OUT_FILE and a JSON summary
// to stdout, then exits one second after the offered load ends: jobs still waiting then
// are abandoned (bottleneck would start them later; the bench measures the 10 s).
"use strict";
const Bottleneck = require("bottleneck");
const fs = require("fs");
const { performance } = require("perf_hooks");

const [redisPort, startMs, seconds, rate] = process.argv.slice(2, 6).map(Number);
const outFile = process.argv[6];
const minTime = Number(process.argv[7] || 1);

// The settings a bottleneck user writes for "1000 a second, bursts of 20, across a cluster"
// (its README, "Constructor", "Reservoir Intervals" and "Clustering"):
// - minTime: 1 ms between job starts, the whole cluster together (the register script
//   spaces starts at Redis's clock, in whole ms): 1000/s. The README: "minTime and
//   maxConcurrent are enough for the majority of use cases", a smooth rate.
// - No reservoir: a burst of 20 on top of 1000/s would be a reservoir topped up by 20
//   every 20 ms, but with Clustering a reservoir interval "should be a multiple of ... 5000"
//   ms (README, issue #88: the heartbeat that applies it runs every 5 s), and a reservoir of
//   5,000 per 5 s allows the whole 5,000 at once. minTime alone admits at most the policy
//   (never its burst), so it is the closest limit bottleneck offers, and the stricter one.
// - No maxConcurrent: the jobs take no time; a concurrency cap would only slow starts.
// - expiration on every job: "strongly recommended" with Clustering (a crashed client's
//   jobs are freed after it).
// - No highWater (its default, unlimited): a high-water mark sheds queued jobs per process,
//   not by the shared schedule; the bench reports how long jobs wait instead.
const limiter = new Bottleneck({
  id: "floodgate-fleet-bench",  // the same id in every process: one shared limiter
  datastore: "ioredis",
  clearDatastore: false,
  clientOptions: { host: "127.0.0.1", port: redisPort },
  minTime,
});
let errors = 0;
limiter.on("error", () => { errors += 1; });

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const proceeds = [];
let offered = 0;

function offer() {
  const offeredUs = nowUs();
  offered += 1;
  limiter.schedule({ expiration: 5000 }, async () => { proceeds.push([offeredUs, nowUs()]); })
    .catch(() => { errors += 1; });
}

async function main() {
  await limiter.ready();
  const startUs = startMs * 1000;
  const endUs = startUs + seconds * 1e6;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startMs - Date.now())));
  // Open loop: every tick offers what is due by now at `rate`, so a late tick catches up.
  await new Promise((resolve) => {
    const tick = () => {
      const now = Math.min(nowUs(), endUs);
      const due = Math.floor((now - startUs) * rate / 1e6);
      while (offered < due) offer();
      if (now >= endUs) return resolve();
      setTimeout(tick, 1);
    };
    tick();
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  fs.writeFileSync(outFile, proceeds.map(([o, p]) => `${o} ${p}`).join("\n") + "\n");
  process.stdout.write(JSON.stringify({ offered, admitted: proceeds.length, errors }) + "\n");
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
