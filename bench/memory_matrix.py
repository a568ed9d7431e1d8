#!/usr/bin/env python3
"""make bench, in-process part: every algorithm on memory://, decisions/s and latency.

Every algorithm on memory://, 1 key and 100,000 keys (uniform and Zipf 1.1), 1 and 2 threads,
through `floodgate bench` (each decision timed on its own, clock reads included): decisions/s and
p50/p99/p999 latency, medians of several runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part

ALGORITHMS = [
    ("gcra", "gcra:1000/1s"),
    ("token_bucket (smooth)", "token_bucket:1000/1s"),
    ("token_bucket (interval)", "token_bucket:1000/1s,refill=interval"),
    ("sliding_log", "sliding_log:1000/1s"),
    ("sliding_window", "sliding_window:1000/1s"),
    ("fixed_window", "fixed_window:1000/1s"),
]
TRAFFIC = [("1 key", 1, 0.0), ("100k uniform", 100_000, 0.0), ("100k zipf 1.1", 100_000, 1.1)]
FIELDS = ("decisions_per_sec", "p50_us", "p99_us", "p999_us")


def run(binary, policy, keys, zipf, threads, duration):
    out = subprocess.run([binary, "bench", "--store", "memory://", "--policy", policy, "--keys",
                          str(keys), "--zipf", str(zipf), "--threads", str(threads), "--duration",
                          duration, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="500ms")
    args = parser.parse_args()

    rows = []
    for name, policy in ALGORITHMS:
        for traffic, keys, zipf in TRAFFIC:
            for threads in (1, 2):
                runs = [run(args.floodgate, policy, keys, zipf, threads, args.duration)
                        for _ in range(args.rounds)]
                row = dict(algorithm=name, traffic=traffic, threads=threads)
                row.update({f: statistics.median(r[f] for r in runs) for f in FIELDS})
                rows.append(row)
                print(f"  {name:<24} {traffic:<14} {threads} thread(s) "
                      f"{row['decisions_per_sec'] / 1e6:6.2f} M/s  p99 {row['p99_us']:.2f} us",
                      file=sys.stderr)

    md = [f"### memory:// by algorithm ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores)\n",
          "`floodgate bench --store memory://`, 1,000 per second per key; medians of "
          f"{args.rounds} runs of {args.duration}. Latency is each decision timed on its own "
          "(two clock reads included).\n",
          "| algorithm | keys | threads | decisions/s | p50 | p99 | p999 |",
          "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['algorithm']} | {r['traffic']} | {r['threads']} | "
                  f"{r['decisions_per_sec'] / 1e6:.2f} M | {r['p50_us']:.2f} µs | "
                  f"{r['p99_us']:.2f} µs | {r['p999_us']:.2f} µs |")
    part_output.save(args.out, "memory_matrix.md", md, {"memory_matrix.csv": (
        ["algorithm", "traffic", "threads", "decisions_per_sec", "p50_us", "p99_us", "p999_us"],
        [[r["algorithm"], r["traffic"], r["threads"], f"{r['decisions_per_sec']:.0f}",
          f"{r['p50_us']:.3f}", f"{r['p99_us']:.3f}", f"{r['p999_us']:.3f}"] for r in rows])})


if __name__ == "__main__":
    main()
