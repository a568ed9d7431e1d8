#!/usr/bin/env python3
"""make bench, prefetch part: leased budgets (prefetch=auto) against per-request decisions on Redis.

docs/prefetch_client.md. Four `floodgate bench` processes at once against one redis-server
this script starts, each with its own store (so four instances share the limit), in two
workloads, each run with the policy as is ("off") and with `,prefetch=auto` ("auto"), back
to back in every round (the order reversed every other round):
  hot key    --keys 1, a limit never reached (fixed_window:1000000000/1h): every decision
             admits. Target: auto >= 10x off in decisions/s (the four processes summed),
             Redis calls per decision <= 0.01 with auto.
  100k keys  --keys 100000, uniform: no key is hot, so auto takes no lease and should cost
             nothing. Target: auto >= 0.9x off.
Each process: --threads 1 --concurrency 256 (pipelined, batching on), denial cache off,
timeout 1 s; a run with an error or a degraded answer is refused. Ratios are taken within
each round; medians reported. Redis calls per decision = script calls (every take, return
and per-request decision is one) over decisions, the four processes summed.
Short run: --rounds 1 --seconds 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from redis_bench import Redis  # a redis-server on a free loopback port

WORKLOADS = {
    "hot key": dict(keys=1, policy="fixed_window:1000000000/1h"),
    "100k keys": dict(keys=100_000, policy="fixed_window:1000000000/1h"),
}
PROCESSES = 4


def run(binary, url, policy, keys, concurrency, seconds):
    """Four `floodgate bench` processes at once: decisions/s summed, calls per decision."""
    command = [binary, "bench", "--store", url, "--policy", policy, "--keys", str(keys),
               "--threads", "1", "--concurrency", str(concurrency),
               "--duration", f"{round(seconds * 1000)}ms", "--json"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(PROCESSES)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=seconds + 60)
        if p.returncode != 0:
            raise SystemExit(f"prefetch_bench: {' '.join(command)} failed: {err}")
        results.append(json.loads(out))
    for r in results:
        if r["errors"] or r["degraded"]:
            raise SystemExit(f"prefetch_bench: {policy}: errors or answers not from Redis: {r}")
        if r["allowed"] < r["decisions"]:
            raise SystemExit(f"prefetch_bench: {policy}: a denial under a limit never reached: {r}")
    decisions = sum(r["decisions"] for r in results)
    return dict(rate=sum(r["decisions_per_sec"] for r in results),
                calls_per_decision=sum(r["store_calls"] for r in results) / max(1, decisions),
                p99_us=max(r["p99_us"] for r in results))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()

    redis = Redis()
    rows = []
    try:
        version = redis.info("server")["redis_version"]
        url = redis.url("denial_cache=0us&timeout=1s")
        for name, w in WORKLOADS.items():
            runs = {"off": [], "auto": []}
            ratios = []
            for r in range(args.rounds):
                order = ["off", "auto"] if r % 2 == 0 else ["auto", "off"]
                got = {}
                for variant in order:
                    policy = w["policy"] + (",prefetch=auto" if variant == "auto" else "")
                    got[variant] = run(args.floodgate, url, policy, w["keys"], args.concurrency,
                                       args.seconds)
                    runs[variant].append(got[variant])
                ratios.append(got["auto"]["rate"] / got["off"]["rate"])
            row = dict(workload=name, keys=w["keys"], policy=w["policy"], ratios=ratios,
                       ratio=statistics.median(ratios))
            for variant, results in runs.items():
                row[variant] = {f: statistics.median(x[f] for x in results)
                                for f in ("rate", "calls_per_decision", "p99_us")}
            rows.append(row)
            print(f"  {name:<10} off {row['off']['rate']:>11.0f}/s  auto {row['auto']['rate']:>11.0f}/s"
                  f"  auto/off {row['ratio']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
                  f"  calls/decision off {row['off']['calls_per_decision']:.4f} auto "
                  f"{row['auto']['calls_per_decision']:.4f}", file=sys.stderr)
    finally:
        redis.stop()

    md = [f"### Prefetch: leased budgets on one Redis ({time.strftime('%Y-%m-%d')}, Redis "
          f"{version}, {os.cpu_count()} cores shared by the clients and redis-server)\n",
          f"{PROCESSES} `floodgate bench` processes at once, each `--threads 1 --concurrency "
          f"{args.concurrency}` with a store of its own (denial cache off), decisions/s summed; "
          "the policy as is (off) and with `,prefetch=auto` back to back in each round; medians "
          f"of {args.rounds} rounds of {args.seconds:g} s; every decision admitted and answered "
          "without on_error. Calls per decision = Redis script calls (takes, returns, "
          "per-request decisions) over decisions. Targets: hot key auto >= 10x off with <= 0.01 "
          "calls per decision; 100k uniform keys auto >= 0.9x off (docs/prefetch_client.md).\n",
          "| workload | policy | off /s | auto /s | auto / off, each round | auto / off | "
          "calls / decision: off, auto | p99: off, auto |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['workload']} ({r['keys']:,} keys) | `{r['policy']}` | "
                  f"{r['off']['rate']:,.0f} | {r['auto']['rate']:,.0f} | "
                  f"{', '.join(f'{x:.2f}' for x in r['ratios'])} | **{r['ratio']:.2f}** | "
                  f"{r['off']['calls_per_decision']:.4f}, {r['auto']['calls_per_decision']:.4f} | "
                  f"{r['off']['p99_us']:,.0f}, {r['auto']['p99_us']:,.0f} µs |")
    part_output.save(args.out, "prefetch.md", md, {"prefetch.csv": (
        ["workload", "keys", "policy", "variant", "decisions_per_sec", "calls_per_decision",
         "p99_us", "auto_over_off", "auto_over_off_each_round"],
        [[r["workload"], r["keys"], r["policy"], v, f"{r[v]['rate']:.0f}",
          f"{r[v]['calls_per_decision']:.5f}", f"{r[v]['p99_us']:.1f}", f"{r['ratio']:.4f}",
          " ".join(f"{x:.4f}" for x in r["ratios"])] for r in rows for v in ("off", "auto")])})


if __name__ == "__main__":
    main()
