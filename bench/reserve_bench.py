#!/usr/bin/env python3
"""make bench, reservations and leases (docs/reservations.md, docs/leases.md): what a
request that reserves and settles, or acquires and releases, costs next to one Check.

`floodgate bench` on memory:// (1 thread, decided inline) and on a redis-server it starts
(batching on, 1,024 in flight), 100,000 keys, four runs back to back in each round (the
order reversed every other round):
  check        --mode check --policy gcra:1000000/1s: one decision per request;
  reserve      --mode reserve, same policy: Reserve 1, then Settle it at 0 (a refund, so
               the settle writes the key) once admitted;
  check_log    --mode check --policy sliding_log:100000/1s: one decision on the state a
               lease keeps (a lease is a reservation on a sliding log);
  acquire      --mode acquire --policy concurrency:100,lease=30s: Acquire, then Release.
The cost ratios, check/s over reserve/s, and check_log/s and check/s over acquire/s, are
taken within each round and their medians reported (target <= 2.2x). A sliding_log check
on a random key adds a run its log keeps for the period, while an acquire's run goes
with its release: the log a check keeps is longer, which is why both bases are shown. Every request was answered by
the store (errors or degraded answers refuse the run) and admitted (fewer than 99%
refuses it: the measured path is the admitting one, which holds and settles).
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

VARIANTS = {
    "check": ["--mode", "check", "--policy", "gcra:1000000/1s"],
    "reserve": ["--mode", "reserve", "--actual", "0", "--policy", "gcra:1000000/1s"],
    "check_log": ["--mode", "check", "--policy", "sliding_log:100000/1s"],
    "acquire": ["--mode", "acquire", "--policy", "concurrency:100,lease=30s"],
}
RATIOS = {"reserve + settle / check": ("check", "reserve"),
          "acquire + release / check (sliding_log)": ("check_log", "acquire"),
          "acquire + release / check (gcra)": ("check", "acquire")}


def bench(binary, url, variant, keys, concurrency, seconds):
    out = subprocess.run([binary, "bench", "--store", url, *VARIANTS[variant], "--keys",
                          str(keys), "--threads", "1", "--concurrency", str(concurrency),
                          "--duration", f"{round(seconds * 1000)}ms", "--json"],
                         capture_output=True, text=True, check=True,
                         timeout=seconds + 60).stdout
    result = json.loads(out)
    n = result["decisions"]
    if result["errors"] or result["degraded"] or result["allowed"] < 0.99 * n:
        raise SystemExit(f"reserve_bench: {variant} on {url}: errors, degraded or denied "
                         f"answers: {out}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--keys", type=int, default=100_000)
    args = parser.parse_args()

    rows = []
    redis = Redis()
    try:
        version = redis.info("server")["redis_version"]
        stores = [("memory://", "memory://", 1),
                  ("redis:// (batch=64)", redis.url("batch=64&denial_cache=0us&timeout=1s"),
                   1024)]
        for store, url, concurrency in stores:
            runs = {v: [] for v in VARIANTS}
            ratios = {name: [] for name in RATIOS}
            for r in range(args.rounds):
                got = {}
                for variant in (list(VARIANTS) if r % 2 == 0 else list(VARIANTS)[::-1]):
                    got[variant] = bench(args.floodgate, url, variant, args.keys, concurrency,
                                         args.seconds)
                    runs[variant].append(got[variant])
                for name, (base, measured) in RATIOS.items():
                    ratios[name].append(got[base]["decisions_per_sec"] /
                                        got[measured]["decisions_per_sec"])
            row = {"store": store, "concurrency": concurrency, "ratios": ratios}
            for variant, results in runs.items():
                row[variant] = {f: statistics.median(x[f] for x in results)
                                for f in ("decisions_per_sec", "p99_us")}
            rows.append(row)
            print(f"  {store:<22} " + "  ".join(
                f"{v} {row[v]['decisions_per_sec']:,.0f}/s" for v in VARIANTS) + "  " + "  ".join(
                f"{name} {statistics.median(x):.2f}" for name, x in ratios.items()),
                  file=sys.stderr)
    finally:
        redis.stop()

    md = [f"### Reservations and leases ({time.strftime('%Y-%m-%d')}, Redis {version}, "
          f"{os.cpu_count()} cores shared by the client and redis-server)\n",
          f"`floodgate bench --keys {args.keys} --threads 1`: a Check (`gcra:1000000/1s`), a "
          "Reserve of 1 settled at 0 once admitted (same policy; the request ends with its "
          "settle), a Check of `sliding_log:100000/1s` (the state a lease keeps) and an "
          "Acquire released once admitted (`concurrency:100,lease=30s`), back to back in "
          f"each round; medians of {args.rounds} rounds of {args.seconds:g} s. memory:// "
          "decides inline (1 in flight); redis:// batches (batch=64, 1,024 in flight, denial "
          "cache off). Every request was admitted and answered by the store. Ratio = "
          "check requests/s over reserve (acquire) requests/s, within each round; acquire + "
          "release against both checks (a sliding_log check keeps its run for the period, an "
          "acquire's run goes with its release, so the check's log is the longer). Target: "
          "<= 2.2.\n",
          "| store | check /s | reserve + settle /s | ratio, each round | ratio | "
          "sliding_log check /s | acquire + release /s | ratio, each round | ratio | "
          "check /s | acquire + release /s | ratio, each round | ratio |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    csv_rows = []
    for r in rows:
        cells = [r["store"]]
        for name, (base, measured) in RATIOS.items():
            each = r["ratios"][name]
            cells += [f"{r[base]['decisions_per_sec']:,.0f}",
                      f"{r[measured]['decisions_per_sec']:,.0f}",
                      ", ".join(f"{x:.2f}" for x in each), f"**{statistics.median(each):.2f}**"]
            csv_rows.append([r["store"], r["concurrency"], name,
                             f"{r[base]['decisions_per_sec']:.0f}",
                             f"{r[measured]['decisions_per_sec']:.0f}",
                             f"{r[measured]['p99_us']:.1f}", f"{statistics.median(each):.4f}",
                             " ".join(f"{x:.4f}" for x in each)])
        md.append("| " + " | ".join(cells) + " |")
    part_output.save(args.out, "reservations.md", md, {"reservations.csv": (
        ["store", "in_flight", "ratio", "base_per_sec", "measured_per_sec", "measured_p99_us",
         "ratio_median", "ratio_each_round"], csv_rows)})


if __name__ == "__main__":
    main()
