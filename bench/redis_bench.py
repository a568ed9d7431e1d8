#!/usr/bin/env python3
"""make bench, Redis part: floodgate's Redis store against the ceiling of one script
call per decision, measured in the same run.

For each algorithm and for 1 and 100,000 keys, one round runs, back to back:
  1. redis-benchmark: EVALSHA of our single-decision script at pipeline depth 32
     (50 clients), the most one-script-per-decision can do on this server;
  2. floodgate bench with batching off (batch=1);
  3. floodgate bench with batching on (batch=64).
Ratios are taken within a round, and the median of the rounds is reported. The denial
cache is off for these runs, so every decision costs a script call like redis-benchmark's
(with one key and the cache on, repeats of a denial never reach Redis at all; that row is
reported separately).

Then: latency at a fixed offered load (open loop), and Redis memory per key for each
algorithm against a plain `SET key <integer> PX <ttl>` for the same key names.
Starts its own redis-server on a free loopback port and stops it at the end.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part

ALGORITHMS = [
    # (name, kind tag, policy, limit, period_us, burst)
    ("gcra", "gcra", "gcra:1000/1s", 1000, 1_000_000, 1000),
    ("token_bucket (smooth)", "tb", "token_bucket:1000/1s", 1000, 1_000_000, 1000),
    ("token_bucket (interval)", "tbi", "token_bucket:1000/1s,refill=interval", 1000, 1_000_000, 1000),
    ("sliding_log", "sl", "sliding_log:1000/1s", 1000, 1_000_000, 1000),
    ("sliding_window", "sw", "sliding_window:1000/1s", 1000, 1_000_000, 1000),
    ("fixed_window", "fw", "fixed_window:1000/1s", 1000, 1_000_000, 1000),
]
SCRIPT_FILE = {"gcra": "gcra", "tb": "token_bucket", "tbi": "token_bucket", "sl": "sliding_log",
               "sw": "sliding_window", "fw": "fixed_window"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server on loopback in its own temp dir (a free port unless given), with
    `extra_args` (cluster mode, say); waits until it answers PING."""

    def __init__(self, port=None, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="floodgate-bench-redis-")
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--logfile", os.path.join(self.dir, "log"),
             *extra_args])
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def cli(self, *args, stdin=None):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], input=stdin,
                              capture_output=True, text=True).stdout

    def used_memory(self):
        for line in self.cli("INFO", "memory").splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        raise SystemExit("no used_memory in INFO")

    def url(self, options=""):
        return f"redis://127.0.0.1:{self.port}" + (f"?{options}" if options else "")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def script_sha(redis, lua_dir, kind):
    body = "".join(open(os.path.join(lua_dir, f"{name}.lua")).read()
                   for name in ("common", SCRIPT_FILE[kind], "single"))
    return redis.cli("SCRIPT", "LOAD", body).strip()


# floodgate keeps IN_FLIGHT decisions out over CONNECTIONS connections; redis-benchmark
# gets the same: as many clients as connections, each pipelining its share.
IN_FLIGHT = 128
CONNECTIONS = 2


def redis_benchmark(redis, sha, kind, limit, period, burst, keys, requests):
    key = f"rb:{kind}:__rand_int__" if keys > 1 else f"rb:{kind}:one"
    args = ["redis-benchmark", "-p", str(redis.port), "-P", str(IN_FLIGHT // CONNECTIONS),
            "-c", str(CONNECTIONS), "-n", str(requests), "--csv"]
    if keys > 1:
        args += ["-r", str(keys)]
    args += ["EVALSHA", sha, "1", key, kind, "", str(limit), str(period), str(burst), "1"]
    out = subprocess.run(args, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(",")]
        if fields[0].startswith("EVALSHA"):
            return float(fields[1])
    raise SystemExit(f"redis-benchmark printed no result: {out}")


def floodgate_bench(binary, url, policy, keys, duration, concurrency=64, threads=2, rate=0):
    args = [binary, "bench", "--store", url, "--policy", policy, "--keys", str(keys),
            "--threads", str(threads), "--concurrency", str(concurrency), "--duration",
            duration, "--json"]
    if rate:
        args += ["--rate", str(rate)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    if result["errors"]:
        raise SystemExit(f"floodgate bench reported errors: {out}")
    return result


def resp(*args):
    out = f"*{len(args)}\r\n"
    for a in args:
        a = str(a)
        out += f"${len(a.encode())}\r\n{a}\r\n"
    return out


def memory_per_key(redis, lua_dir, kind, keys):
    """Redis memory per key for one algorithm (each key written by one decision of our
    script under a 100/1h policy, named as floodgate names it: fg:<tag>:user:N), and for a
    plain SET key <integer> PX <ttl> on exactly the same key names."""
    sha = script_sha(redis, lua_dir, kind)
    names = [f"fg:{kind}:user:{i}" for i in range(keys)]
    redis.cli("FLUSHALL")
    before = redis.used_memory()
    redis.cli("--pipe", stdin="".join(
        resp("EVALSHA", sha, 1, n, kind, "", 100, 3_600_000_000, 100, 1) for n in names))
    ours = redis.used_memory() - before
    if int(redis.cli("DBSIZE")) != keys:
        raise SystemExit(f"expected {keys} keys, found {redis.cli('DBSIZE')}")
    redis.cli("FLUSHALL")
    before = redis.used_memory()
    now = int(time.time() * 1e6)
    redis.cli("--pipe", stdin="".join(resp("SET", n, now, "PX", 3_600_000) for n in names))
    plain = redis.used_memory() - before
    redis.cli("FLUSHALL")
    return ours / keys, plain / keys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--lua", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="2s")
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()

    redis = Redis()
    rows, latency, memory = [], [], []
    try:
        version = redis.cli("INFO", "server")
        version = next(l.split(":")[1] for l in version.splitlines() if l.startswith("redis_version"))
        for name, kind, policy, limit, period, burst in ALGORITHMS:
            sha = script_sha(redis, args.lua, kind)
            for keys in (1, 100_000):
                ceiling, off, on, r_off, r_on = [], [], [], [], []
                for _ in range(args.rounds):
                    redis.cli("FLUSHALL")
                    rb = redis_benchmark(redis, sha, kind, limit, period, burst, keys, args.requests)
                    common = f"connections={CONNECTIONS}&denial_cache=0us"
                    b1 = floodgate_bench(args.floodgate, redis.url(f"batch=1&{common}&prefix=fb1:"),
                                         policy, keys, args.duration,
                                         concurrency=IN_FLIGHT // 2, threads=2)
                    b64 = floodgate_bench(args.floodgate, redis.url(f"batch=64&{common}&prefix=fb64:"),
                                          policy, keys, args.duration, concurrency=IN_FLIGHT,
                                          threads=1)
                    ceiling.append(rb)
                    off.append(b1["decisions_per_sec"])
                    on.append(b64["decisions_per_sec"])
                    r_off.append(b1["decisions_per_sec"] / rb)
                    r_on.append(b64["decisions_per_sec"] / rb)
                row = dict(algorithm=name, keys=keys, ceiling=statistics.median(ceiling),
                           batch_off=statistics.median(off), batch_on=statistics.median(on),
                           ratio_off=statistics.median(r_off), ratio_on=statistics.median(r_on))
                rows.append(row)
                print(f"  {name:<24} {keys:>6} keys  ceiling {row['ceiling']:>9.0f}/s  "
                      f"batch off {row['batch_off']:>9.0f}/s ({row['ratio_off']:.2f}x)  "
                      f"batch on {row['batch_on']:>9.0f}/s ({row['ratio_on']:.2f}x)", file=sys.stderr)
        cached = floodgate_bench(args.floodgate, redis.url("prefix=fbc:"), "fixed_window:1000/1s",
                                 1, args.duration)
        for batch in (1, 64):
            runs = [floodgate_bench(args.floodgate,
                                    redis.url(f"batch={batch}&denial_cache=0us&prefix=fl:"),
                                    "gcra:1000/1s", 100_000, "3s", concurrency=256, threads=1,
                                    rate=50_000)
                    for _ in range(args.rounds)]
            latency.append({k: statistics.median(r[f] for r in runs) for k, f in
                            (("rate", "decisions_per_sec"), ("p50", "p50_us"), ("p99", "p99_us"),
                             ("p999", "p999_us"))} | dict(batch=batch))
        for name, kind, *_ in ALGORITHMS:
            ours, plain = memory_per_key(redis, args.lua, kind, 100_000)
            memory.append(dict(algorithm=name, ours=ours, plain=plain, ratio=ours / plain))
            print(f"  memory {name:<24} {ours:.1f} B/key vs plain SET {plain:.1f} "
                  f"({ours / plain:.2f}x)", file=sys.stderr)
    finally:
        redis.stop()

    md = [f"### Redis store ({time.strftime('%Y-%m-%d')}, Redis {version}, "
          f"{os.cpu_count()} cores shared by server and client)\n",
          "Decisions/s; ceiling = `redis-benchmark` running EVALSHA of the algorithm's "
          f"single-decision script with {IN_FLIGHT} calls in flight: {CONNECTIONS} clients "
          f"pipelining {IN_FLIGHT // CONNECTIONS} each. floodgate: `floodgate bench` with the "
          f"same {IN_FLIGHT} decisions in flight over the same {CONNECTIONS} connections, "
          "denial cache off: 2 threads x 64 with batching off (the same script, one call per "
          "decision), 1 thread x 128 with batching on (floodgate's batch script, up to 64 "
          "decisions per call: how far batching lifts floodgate past the one-call-per-decision "
          "ceiling). On 2 cores the client threads compete with redis-server; each is the "
          "faster client setup for its mode. Ratios are taken within each round; medians of "
          f"{args.rounds} rounds. Targets: >= 0.8x with batching off, >= 1.5x with batching "
          "on.\n",
          "| algorithm | keys | ceiling | batch off | ratio | batch on (64) | ratio |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['algorithm']} | {r['keys']:,} | {r['ceiling']:,.0f} | {r['batch_off']:,.0f} | "
                  f"{r['ratio_off']:.2f} | {r['batch_on']:,.0f} | **{r['ratio_on']:.2f}** |")
    md.append(f"\nOne key under `fixed_window:1000/1s` with the denial cache on (the default): "
              f"{cached['decisions_per_sec']:,.0f} decisions/s, since repeated denials are "
              f"answered in process.\n")
    md += ["Latency at a fixed offered load of 50,000 decisions/s (open loop; latency counts "
           f"from each request's due time), gcra, 100,000 keys; medians of {args.rounds} runs "
           "of 3 s:\n",
           "| batching | achieved/s | p50 | p99 | p999 |", "|---|---:|---:|---:|---:|"]
    for l in latency:
        md.append(f"| {'off' if l['batch'] == 1 else 'on (64)'} | {l['rate']:,.0f} | "
                  f"{l['p50']:.0f} µs | {l['p99']:.0f} µs | {l['p999']:.0f} µs |")
    md += ["\nRedis memory per key (`INFO memory` delta over 100,000 keys), against a plain "
           "`SET key <integer> PX <ttl>` for exactly the same key names (`fg:<tag>:user:N`, "
           "each written by one decision). Targets: gcra and "
           "fixed_window <= 1.15x, token_bucket and sliding_window <= 1.3x.\n",
           "| algorithm | floodgate | plain SET | ratio |", "|---|---:|---:|---:|"]
    for m in memory:
        md.append(f"| {m['algorithm']} | {m['ours']:.1f} B | {m['plain']:.1f} B | **{m['ratio']:.2f}** |")
    part_output.save(args.out, "redis.md", md, {
        "redis.csv": (
            ["algorithm", "keys", "ceiling_per_sec", "batch_off_per_sec", "ratio_off",
             "batch_on_per_sec", "ratio_on"],
            [[r["algorithm"], r["keys"], f"{r['ceiling']:.0f}", f"{r['batch_off']:.0f}",
              f"{r['ratio_off']:.4f}", f"{r['batch_on']:.0f}", f"{r['ratio_on']:.4f}"]
             for r in rows]),
        "redis_latency.csv": (
            ["batch", "achieved_per_sec", "p50_us", "p99_us", "p999_us"],
            [[l["batch"], f"{l['rate']:.0f}", f"{l['p50']:.1f}", f"{l['p99']:.1f}",
              f"{l['p999']:.1f}"] for l in latency]),
        "redis_memory.csv": (
            ["algorithm", "floodgate_bytes_per_key", "plain_set_bytes_per_key", "ratio"],
            [[m["algorithm"], f"{m['ours']:.1f}", f"{m['plain']:.1f}", f"{m['ratio']:.4f}"]
             for m in memory]),
    })


if __name__ == "__main__":
    main()
