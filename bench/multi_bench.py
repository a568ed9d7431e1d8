#!/usr/bin/env python3
"""make bench, multi part: a request decided over two limits against one, on Redis.

Several limits in one decision (docs/multi.md), on Redis: what a request decided over two limits
costs next to a request decided over one, batching on.

`floodgate bench` against a redis-server it starts (and, unless --no-cluster, a
3-primary Redis Cluster), 100,000 keys, four runs back to back in each round (the
order reversed every other round):
  one        --policy gcra:1000/1s: a single decision per request;
  one_multi  the same policy with --multi: a multi-decision of that one item, the cost of
             the multi-decision path alone (its bookkeeping in the client; in
             lua/batch.lua a group of one is the item's own decision);
  two        --policy gcra:1000/1s --policy sliding_window:60000/1m --same-slot: both
             limits, all or nothing, the request's two keys in one {hash tag} as the
             service keys a rule's limits (one script call; on a cluster, one slot);
  apart      the same two keys with --one-by-one: a single decision on each, not all or
             nothing, in the same batches: the floor of any two-limit decision that keeps
             each limit's state under a key of its own (docs/algorithms.md, "Store keys").
The cost ratio, one-limit requests/s over two-limit requests/s, is taken within each
round and its median reported, with the medians of every run; so is the floor, one-limit
requests/s over apart requests/s. Besides requests/s: the
p99, the CPU time every redis-server and the client used (from /proc) per request, and
requests per script call. The denial cache is off and the timeout 1 s, so every answer
is a Redis decision (a run with a degraded answer is refused); the rates keep every
request allowed (a run with fewer than 99% allowed is refused), so the measured path is
the admitting one, which writes every item. The in-process counterpart is
bench/memory_bench --multi; HTTP, bench/http_bench.py.
Short run: --rounds 1 --seconds 1 --no-cluster.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from cluster_bench import cpu_seconds, start_cluster, wait_healthy
from redis_bench import Redis  # a redis-server on a free loopback port

FIRST, SECOND = "gcra:1000/1s", "sliding_window:60000/1m"
VARIANTS = {
    "one": ["--policy", FIRST],
    "one_multi": ["--policy", FIRST, "--multi"],
    "two": ["--policy", FIRST, "--policy", SECOND, "--same-slot"],
    "apart": ["--policy", FIRST, "--policy", SECOND, "--same-slot", "--one-by-one"],
}
FIELDS = ("decisions_per_sec", "p50_us", "p99_us", "server_us", "client_us", "per_call")
BATCH = 64  # floodgate's default (RedisOptions::max_batch)


def bench(binary, url, variant, keys, concurrency, seconds, pids):
    """One `floodgate bench` run of `variant`, with the CPU every process in `pids` and the
    client used per request, and requests per script call."""
    before = {pid: cpu_seconds(pid) for pid in pids}
    start = os.times()
    out = subprocess.run([binary, "bench", "--store", url, *VARIANTS[variant], "--keys",
                          str(keys), "--threads", "1", "--concurrency", str(concurrency),
                          "--duration", f"{round(seconds * 1000)}ms", "--json"],
                         capture_output=True, text=True, check=True,
                         timeout=seconds + 60).stdout
    end = os.times()
    result = json.loads(out)
    if result["errors"] or result["degraded"]:
        raise SystemExit(f"multi_bench: {variant} on {url}: errors or answers not from Redis: "
                         f"{out}")
    n = result["decisions"]
    if result["allowed"] < 0.99 * n:
        raise SystemExit(f"multi_bench: {variant} on {url}: only {result['allowed']} of {n} "
                         "allowed; the limits were meant to admit every request")
    result["server_us"] = sum(cpu_seconds(pid) - before[pid] for pid in pids) / n * 1e6
    result["client_us"] = ((end.children_user - start.children_user) +
                           (end.children_system - start.children_system)) / n * 1e6
    result["per_call"] = n / max(1, result["store_calls"])
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.2)
    parser.add_argument("--keys", type=int, default=100_000)
    # The depths where each store's table does best: redis.md's batching-on runs win at
    # 1,024 in flight; cluster.md runs at 128.
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--cluster-concurrency", type=int, default=128)
    parser.add_argument("--no-cluster", action="store_true", help="standalone Redis only")
    args = parser.parse_args()

    servers, rows = [], []
    options = f"batch={BATCH}&denial_cache=0us&timeout=1s"
    try:
        redis = Redis()
        servers.append(redis)
        version = redis.info("server")["redis_version"]
        stores = [("redis", redis.url(options), [redis.proc.pid], args.concurrency)]
        if not args.no_cluster:
            nodes = start_cluster(servers)
            wait_healthy(nodes)
            stores.append(("redis cluster (3 primaries)", "redis-cluster://" + ",".join(
                f"127.0.0.1:{n.port}" for n in nodes) + f"?{options}",
                           [n.proc.pid for n in nodes], args.cluster_concurrency))
        for store, url, pids, concurrency in stores:
            runs = {v: [] for v in VARIANTS}
            ratios, multi_of_one, floors = [], [], []
            for r in range(args.rounds):
                got = {}
                for variant in (list(VARIANTS) if r % 2 == 0 else list(VARIANTS)[::-1]):
                    got[variant] = bench(args.floodgate, url, variant, args.keys, concurrency,
                                         args.seconds, pids)
                    runs[variant].append(got[variant])
                ratios.append(got["one"]["decisions_per_sec"] / got["two"]["decisions_per_sec"])
                multi_of_one.append(got["one"]["decisions_per_sec"] /
                                    got["one_multi"]["decisions_per_sec"])
                floors.append(got["one"]["decisions_per_sec"] / got["apart"]["decisions_per_sec"])
            row = dict(store=store, concurrency=concurrency, ratio=statistics.median(ratios),
                       multi_of_one=statistics.median(multi_of_one), ratios=ratios,
                       floor=statistics.median(floors))
            for variant, results in runs.items():
                row[variant] = {f: statistics.median(x[f] for x in results) for f in FIELDS}
            rows.append(row)
            print(f"  {store:<28} one {row['one']['decisions_per_sec']:>9.0f}/s  one via multi "
                  f"{row['one_multi']['decisions_per_sec']:>9.0f}/s  two "
                  f"{row['two']['decisions_per_sec']:>9.0f}/s  apart "
                  f"{row['apart']['decisions_per_sec']:>9.0f}/s  cost ratio {row['ratio']:.2f} "
                  f"(floor {row['floor']:.2f}) "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})  Redis CPU/request "
                  f"{row['one']['server_us']:.2f} / {row['two']['server_us']:.2f} µs",
                  file=sys.stderr)
    finally:
        for s in servers:
            s.stop()

    md = [f"### Several limits in one decision: Redis ({time.strftime('%Y-%m-%d')}, Redis "
          f"{version}, {os.cpu_count()} cores shared by the client and every redis-server)\n",
          f"`floodgate bench --keys {args.keys} --threads 1` with batching on (batch={BATCH}), "
          "denial cache off: one limit (`--policy " + FIRST + "`, a single decision per "
          "request), that limit as a multi-decision of one item (`--multi`), and two limits "
          f"(`--policy {FIRST} --policy {SECOND} --same-slot`: one multi-decision per request, "
          "all or nothing, its two keys in one {hash tag} as the service keys a rule's limits, "
          "so one script call decides both), and those two keys decided apart (`--one-by-one`: "
          "a single decision on each, not all or nothing, in the same batches), back to back "
          "in each round; medians of "
          f"{args.rounds} rounds of {args.seconds:g} s. Every request was allowed and answered "
          "by Redis. Cost ratio = one-limit requests/s over two-limit requests/s, taken in "
          "each round. Target: cost ratio <= 1.3 (batched). Floor = one-limit requests/s over "
          "the requests/s of the two limits decided apart: what any two-limit decision costs "
          "while each limit keeps its state under a key of its own (algorithms.md, \"Store "
          "keys\"), before it is all or nothing. CPU per request from /proc: all "
          "redis-servers together, and the client process.\n",
          "| store | in flight | one limit /s | p99 | one limit via multi /s | two limits /s | "
          "p99 | two apart /s | cost ratio, each round | cost ratio | floor | redis CPU / "
          "request: one, one via multi, two, apart | client CPU / request: one, one via multi, "
          "two, apart | requests / call: one, two |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        one, om, two, apart = r["one"], r["one_multi"], r["two"], r["apart"]
        md.append(f"| {r['store']} | {r['concurrency']:,} | {one['decisions_per_sec']:,.0f} | "
                  f"{one['p99_us']:,.0f} µs | {om['decisions_per_sec']:,.0f} | "
                  f"{two['decisions_per_sec']:,.0f} | {two['p99_us']:,.0f} µs | "
                  f"{apart['decisions_per_sec']:,.0f} | "
                  f"{', '.join(f'{x:.2f}' for x in r['ratios'])} | **{r['ratio']:.2f}** | "
                  f"{r['floor']:.2f} | {one['server_us']:.2f}, {om['server_us']:.2f}, "
                  f"{two['server_us']:.2f}, {apart['server_us']:.2f} µs | "
                  f"{one['client_us']:.2f}, {om['client_us']:.2f}, {two['client_us']:.2f}, "
                  f"{apart['client_us']:.2f} µs | {one['per_call']:.1f}, {two['per_call']:.1f} |")
    part_output.save(args.out, "multi_redis.md", md, {"multi_redis.csv": (
        ["store", "batch", "in_flight", "variant", "policies", "requests_per_sec", "p50_us",
         "p99_us", "redis_cpu_us_per_request", "client_cpu_us_per_request", "requests_per_call",
         "cost_ratio_one_over_two", "one_over_one_via_multi", "floor_one_over_apart",
         "cost_ratio_each_round"],
        [[r["store"], BATCH, r["concurrency"], v, " ".join(VARIANTS[v]),
          f"{r[v]['decisions_per_sec']:.0f}", f"{r[v]['p50_us']:.1f}", f"{r[v]['p99_us']:.1f}",
          f"{r[v]['server_us']:.3f}", f"{r[v]['client_us']:.3f}", f"{r[v]['per_call']:.2f}",
          f"{r['ratio']:.4f}", f"{r['multi_of_one']:.4f}", f"{r['floor']:.4f}",
          " ".join(f"{x:.4f}" for x in r["ratios"])] for r in rows for v in VARIANTS])})


if __name__ == "__main__":
    main()
