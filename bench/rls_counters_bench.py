#!/usr/bin/env python3
"""make bench, RLS counters part: upstream's counters against floodgate's own RLS path, on Redis.

What sharing envoyproxy/ratelimit's counters costs (docs/envoy.md, "Shared counters"). One
`floodgate serve` on one redis-server answers two domains of one config: "upstream", a rule
without extensions (`SECOND: 1000`), counted on upstream's keys by lua/upstream.lua (INCRBY +
EXPIRE), and "floodgate", the same limit with `algorithm: fixed_window` (an extension), decided
by floodgate's fixed window script on its own keys. The load is bench/rls_load (gRPC, N calls in
flight), descriptor remote_address=c<random of 100,000>, each domain in turn within a round (the
order reversed every other round). Reported: requests/s of each path, p99, the server's CPU per
request, and the ratio upstream / floodgate (median of the rounds'). Target: the compatibility
costs at most 10% (ratio >= 0.9). Both paths are proven to limit first (one key, 3000 requests).
Short run: --rounds 1 --seconds 2.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from http_bench import free_ports, wait_port
from redis_bench import Redis  # a redis-server on a free loopback port
from rls_bench import rls_load, with_cpu

VALUES = 100_000
LIMIT = 1000

CONFIGS = {
    "upstream": f"""domain: upstream
descriptors:
  - key: remote_address
    rate_limit: {{unit: SECOND, requests_per_unit: {LIMIT}}}
""",
    "floodgate": f"""domain: floodgate
descriptors:
  - key: remote_address
    rate_limit: {{unit: SECOND, requests_per_unit: {LIMIT}, algorithm: fixed_window}}
""",
}


def load(args, grpc_port, domain, seconds, values=VALUES, requests=0):
    return rls_load(args, grpc_port, seconds, values=values, requests=requests, domain=domain)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--rls-load", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--grpc-connections", type=int, default=4)
    parser.add_argument("--server-threads", type=int, default=1)
    args = parser.parse_args()
    if args.rls_load is None:
        args.rls_load = os.path.join(os.path.dirname(os.path.abspath(args.floodgate)), "bench",
                                     "rls_load")
    rounds, proofs = [], {}
    redis = Redis()
    with tempfile.TemporaryDirectory(prefix="floodgate-rls-counters-") as work:
        config_dir = os.path.join(work, "ratelimit", "config")
        os.makedirs(config_dir)
        for name, text in CONFIGS.items():
            with open(os.path.join(config_dir, name + ".yaml"), "w") as f:
                f.write(text)
        http_port, grpc_port = free_ports(2)
        env = dict(os.environ, RUNTIME_ROOT=work, RUNTIME_SUBDIRECTORY="ratelimit")
        log = open(os.path.join(work, "serve.log"), "w")
        serve = subprocess.Popen(
            [args.floodgate, "serve", "--store", f"redis://127.0.0.1:{redis.port}",
             "--listen", f"127.0.0.1:{http_port}", "--grpc-listen", f"127.0.0.1:{grpc_port}",
             "--threads", str(args.server_threads)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(http_port, serve, "floodgate serve")
            wait_port(grpc_port, serve, "floodgate serve (gRPC)")
            for domain in CONFIGS:
                proof = load(args, grpc_port, domain, 10, values=1, requests=3 * LIMIT)
                if not (proof["ok"] >= LIMIT and proof["over_limit"] > 0):
                    raise SystemExit(f"rls_counters_bench: {domain} did not limit: {proof}")
                proofs[domain] = proof
            for i in range(args.rounds):
                order = list(CONFIGS) if i % 2 == 0 else list(reversed(CONFIGS))
                got = {d: with_cpu(serve.pid, lambda d=d: load(args, grpc_port, d, args.seconds))
                       for d in order}
                rounds.append(got)
                print(f"round {i + 1}: " + "; ".join(
                    f"{d} {got[d]['rps']:.0f}/s p99 {got[d]['p99_us']:.0f} us, server "
                    f"{got[d]['server_cpu_us']:.1f} us/request" for d in CONFIGS),
                      file=sys.stderr)
        finally:
            serve.terminate()
            serve.wait(timeout=30)
            log.close()
            redis.stop()
    ratio = statistics.median(r["upstream"]["rps"] / r["floodgate"]["rps"] for r in rounds)
    cpu_ratio = statistics.median(
        r["floodgate"]["server_cpu_us"] / r["upstream"]["server_cpu_us"] for r in rounds)
    med = lambda d, field: statistics.median(r[d][field] for r in rounds)
    load_avg = os.getloadavg()
    md = [f"### RLS: upstream's counters against floodgate's own path ({time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores shared by the load, the server and Redis; load average "
          f"{load_avg[0]:.2f} at the end)\n",
          f"One redis-server; `serve --threads {args.server_threads}`; SECOND: {LIMIT} on "
          f"{VALUES:,} keys; gRPC: bench/rls_load, {args.concurrency} calls in flight over "
          f"{args.grpc_connections} connections; {args.rounds} rounds of {args.seconds:g} s, "
          f"medians. Both proven to limit first (one key, {3 * LIMIT} requests: " +
          ", ".join(f"{d} {p['ok']} OK / {p['over_limit']} OVER_LIMIT" for d, p in proofs.items())
          + ").\n",
          "| path | requests/s | p99 | server CPU per request |",
          "|---|---:|---:|---:|",
          f"| upstream's counters (lua/upstream.lua) | {med('upstream', 'rps'):,.0f} | "
          f"{med('upstream', 'p99_us'):,.0f} us | {med('upstream', 'server_cpu_us'):.1f} us |",
          f"| floodgate's fixed window (`algorithm: fixed_window`) | "
          f"{med('floodgate', 'rps'):,.0f} | {med('floodgate', 'p99_us'):,.0f} us | "
          f"{med('floodgate', 'server_cpu_us'):.1f} us |",
          "",
          f"upstream / floodgate requests/s: **{ratio:.2f}x** (target >= 0.9x: the "
          f"compatibility costs at most 10%). Requests per second of server CPU: "
          f"**{cpu_ratio:.2f}x**."]
    rows = [[i + 1] + [f"{r[d][f]:.2f}" for d in CONFIGS for f in ("rps", "p99_us",
                                                                   "server_cpu_us")] +
            [f"{r['upstream']['rps'] / r['floodgate']['rps']:.3f}"] for i, r in enumerate(rounds)]
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    part_output.save(out, "rls_counters.md", md, {"rls_counters.csv": (
        ["round", "upstream_rps", "upstream_p99_us", "upstream_server_cpu_us", "floodgate_rps",
         "floodgate_p99_us", "floodgate_server_cpu_us", "ratio"], rows)})


if __name__ == "__main__":
    main()
