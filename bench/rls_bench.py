#!/usr/bin/env python3
"""make bench, RLS part: Envoy's rate limit service over gRPC against HTTP `/v1/check`.

Envoy's rate limit service (RLS v3, gRPC) against floodgate's own HTTP `/v1/check`, the same
decisions on memory://, the same server.

One `floodgate serve` on memory:// answers both: gRPC ShouldRateLimit for domain "bench",
descriptor remote_address=c<random of 100,000> under upstream's rule `SECOND: 1000`
(a fixed window of 1000 per second, aligned to the epoch), and /v1/check for key
c<random of 100,000> under a rule of fixed_window:1000/1s. gRPC load comes from
bench/rls_load (gRPC's completion-queue client API, N calls in flight over a few HTTP/2
connections), HTTP load from wrk (as bench/http_bench.py drives it). Both sides run
back to back in each round (the order reversed every other round); the ratio of
requests/s (RLS over HTTP) is taken within a round and the median of the rounds
reported, with the medians of requests/s and p99. Target: RLS >= 0.8x HTTP.
Each run also reads the CPU the server spent (/proc/<pid>/stat) and the load generator
spent (its rusage) per request: the load shares the machine's 2 cores with the server,
so requests/s measure both, and the server's CPU per request is the part that is
floodgate's alone (its ratio is reported beside the requests/s one).

Before anything is measured, both paths are proven to limit on that very rule: 3000
requests on one key as fast as they go must see both answers (OK and OVER_LIMIT over
gRPC; "allowed": true and false from /v1/check).
Short run: --rounds 1 --seconds 2.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from http_bench import free_ports, wait_port

VALUES = 100_000
LIMIT = 1000  # per second, on both paths

RLS_CONFIG = f"""domain: bench
descriptors:
  - key: remote_address
    rate_limit: {{unit: SECOND, requests_per_unit: {LIMIT}}}
"""

FLOODGATE_CONFIG = f"""rules:
  - name: api
    policy: fixed_window:{LIMIT}/1s
"""

CHECK_LUA = """
math.randomseed(os.time())
local key = os.getenv("RLS_BENCH_KEY")
request = function()
  local k = key or ("c" .. math.random(1, %d))
  return wrk.format("POST", "/v1/check", {["Content-Type"] = "application/json"},
                    '{"key":"' .. k .. '","rule":"api"}')
end
allowed, denied = 0, 0
response = function(status, headers, body)
  if body:find('"allowed":true', 1, true) then allowed = allowed + 1 end
  if body:find('"allowed":false', 1, true) then denied = denied + 1 end
end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function()
  local a, d = 0, 0
  for _, t in ipairs(threads) do a = a + t:get("allowed"); d = d + t:get("denied") end
  io.write(string.format("verdicts allowed=%%d denied=%%d\\n", a, d))
end
""" % VALUES


def rls_load(args, grpc_port, seconds, values=VALUES, requests=0, domain="bench"):
    out = subprocess.run(
        [args.rls_load, "--target", f"127.0.0.1:{grpc_port}", "--domain", domain,
         "--key", "remote_address", "--values", str(values), "--concurrency",
         str(args.concurrency), "--connections", str(args.grpc_connections), "--seconds",
         str(seconds), "--requests", str(requests), "--json"],
        capture_output=True, text=True, timeout=seconds + 60)
    result = json.loads(out.stdout)
    if result["errors"]:
        raise SystemExit(f"rls_bench: {result['errors']} gRPC errors: {out.stderr}")
    return dict(rps=result["requests_per_sec"], p99_us=result["p99_us"], ok=result["ok"],
                over_limit=result["over_limit"], requests=result["ok"] + result["over_limit"])


def wrk(args, http_port, script, seconds, key=None):
    env = dict(os.environ)
    if key:
        env["RLS_BENCH_KEY"] = key
    # wrk takes whole seconds.
    run = subprocess.run(["wrk", "-t", str(args.wrk_threads), "-c", str(args.connections),
                          "-d", f"{max(1, round(seconds))}s", "--latency", "-s", script,
                          f"http://127.0.0.1:{http_port}"], capture_output=True, text=True,
                         env=env, timeout=seconds + 60)
    out = run.stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not found:
        raise SystemExit(f"rls_bench: wrk failed: {out}{run.stderr}")
    rps = float(found.group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 1, "ms": 1000, "s": 1_000_000}[p99.group(2)]
    verdicts = re.search(r"verdicts allowed=(\d+) denied=(\d+)", out)
    return dict(rps=rps, p99_us=float(p99.group(1)) * scale, allowed=int(verdicts.group(1)),
                denied=int(verdicts.group(2)),
                requests=int(re.search(r"(\d+) requests in", out).group(1)))


def process_cpu_s(pid):
    """User + system CPU seconds a process has used so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def with_cpu(serve_pid, run):
    """run()'s result with the CPU each request cost the server and the load generator
    (µs): on 2 shared cores the requests/s of a path also measure its load generator,
    and these do not."""
    server0, load0 = process_cpu_s(serve_pid), children_cpu_s()
    result = run()
    n = max(1, result["requests"])
    result["server_cpu_us"] = (process_cpu_s(serve_pid) - server0) * 1e6 / n
    result["load_cpu_us"] = (children_cpu_s() - load0) * 1e6 / n
    return result


def prove(args, grpc_port, http_port, script):
    """Both paths deny over the measured limit: one key, as fast as it goes."""
    rls = rls_load(args, grpc_port, 10, values=1, requests=3 * LIMIT)
    if not (rls["ok"] >= LIMIT and rls["over_limit"] > 0):
        raise SystemExit(f"rls_bench: RLS did not limit one key: {rls}")
    http = wrk(args, http_port, script, 2, key="proof")
    if not (http["allowed"] >= LIMIT and http["denied"] > 0):
        raise SystemExit(f"rls_bench: /v1/check did not limit one key: {http}")
    return rls, http


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--rls-load", default=None, help="bench/rls_load (default: beside floodgate's build)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--grpc-connections", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64, help="wrk connections")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--server-threads", type=int, default=1)
    args = parser.parse_args()
    if args.rls_load is None:
        args.rls_load = os.path.join(os.path.dirname(os.path.abspath(args.floodgate)), "bench",
                                     "rls_load")
    with tempfile.TemporaryDirectory(prefix="floodgate-rls-bench-") as work:
        os.makedirs(os.path.join(work, "ratelimit", "config"))
        with open(os.path.join(work, "ratelimit", "config", "config.yaml"), "w") as f:
            f.write(RLS_CONFIG)
        config = os.path.join(work, "floodgate.yaml")
        with open(config, "w") as f:
            f.write(FLOODGATE_CONFIG)
        script = os.path.join(work, "check.lua")
        with open(script, "w") as f:
            f.write(CHECK_LUA)
        http_port, grpc_port = free_ports(2)
        env = dict(os.environ, RUNTIME_ROOT=work, RUNTIME_SUBDIRECTORY="ratelimit")
        log = open(os.path.join(work, "serve.log"), "w")
        serve = subprocess.Popen(
            [args.floodgate, "serve", "--config", config, "--store", "memory://",
             "--listen", f"127.0.0.1:{http_port}", "--grpc-listen", f"127.0.0.1:{grpc_port}",
             "--threads", str(args.server_threads)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(http_port, serve, "floodgate serve")
            wait_port(grpc_port, serve, "floodgate serve (gRPC)")
            proof_rls, proof_http = prove(args, grpc_port, http_port, script)
            rounds = []
            for i in range(args.rounds):
                run_rls = lambda: with_cpu(serve.pid, lambda: rls_load(args, grpc_port,
                                                                      args.seconds))
                run_http = lambda: with_cpu(serve.pid, lambda: wrk(args, http_port, script,
                                                                   args.seconds))
                if i % 2 == 0:
                    r, h = run_rls(), run_http()
                else:
                    h = run_http()
                    r = run_rls()
                rounds.append((r, h))
                print(f"round {i + 1}: RLS {r['rps']:.0f}/s p99 {r['p99_us']:.0f} us, server "
                      f"{r['server_cpu_us']:.1f} us/request; /v1/check {h['rps']:.0f}/s p99 "
                      f"{h['p99_us']:.0f} us, server {h['server_cpu_us']:.1f} us/request",
                      file=sys.stderr)
        finally:
            serve.terminate()
            serve.wait(timeout=30)
            log.close()
    ratio = statistics.median(r["rps"] / h["rps"] for r, h in rounds)
    # Requests each path could answer per second of server CPU, RLS over HTTP.
    cpu_ratio = statistics.median(h["server_cpu_us"] / r["server_cpu_us"] for r, h in rounds)
    med = lambda side, field: statistics.median(x[side][field] for x in rounds)
    md = [f"### Envoy RLS v3 (gRPC) against /v1/check ({time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores shared by the load and the server)\n",
          f"memory://, fixed window {LIMIT}/s on {VALUES:,} keys, the same decisions on both "
          f"paths; `serve --threads {args.server_threads}`; gRPC: bench/rls_load, "
          f"{args.concurrency} calls in flight over {args.grpc_connections} connections; HTTP: "
          f"`wrk -t{args.wrk_threads} -c{args.connections}`; {args.rounds} rounds of "
          f"{args.seconds:g} s, medians. Both proven to limit first (one key, "
          f"{3 * LIMIT} requests: gRPC {proof_rls['ok']} OK / {proof_rls['over_limit']} "
          f"OVER_LIMIT; HTTP {proof_http['allowed']} allowed / {proof_http['denied']} denied).\n",
          "The server's CPU per request (its /proc CPU time over the requests answered) and "
          "the load generator's are measured in the same runs: on 2 cores shared by the load "
          "and the server, requests/s also measure the load generator, and the gRPC client "
          "spends more per call than wrk does.\n",
          "| path | requests/s | p99 | server CPU per request | load generator CPU per request |",
          "|---|---:|---:|---:|---:|",
          f"| RLS v3 gRPC `ShouldRateLimit` | {med(0, 'rps'):,.0f} | {med(0, 'p99_us'):,.0f} us | "
          f"{med(0, 'server_cpu_us'):.1f} us | {med(0, 'load_cpu_us'):.1f} us |",
          f"| HTTP `POST /v1/check` | {med(1, 'rps'):,.0f} | {med(1, 'p99_us'):,.0f} us | "
          f"{med(1, 'server_cpu_us'):.1f} us | {med(1, 'load_cpu_us'):.1f} us |",
          "",
          f"RLS / HTTP requests/s: **{ratio:.2f}x** (median of the rounds' ratios; target >= 0.8x). "
          f"Requests per second of server CPU, RLS / HTTP: **{cpu_ratio:.2f}x**."]
    rows = [[i + 1, f"{r['rps']:.0f}", f"{r['p99_us']:.0f}", f"{r['server_cpu_us']:.2f}",
             f"{r['load_cpu_us']:.2f}", f"{h['rps']:.0f}", f"{h['p99_us']:.0f}",
             f"{h['server_cpu_us']:.2f}", f"{h['load_cpu_us']:.2f}", f"{r['rps'] / h['rps']:.3f}",
             f"{h['server_cpu_us'] / r['server_cpu_us']:.3f}"] for i, (r, h) in enumerate(rounds)]
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    part_output.save(out, "rls.md", md, {"rls.csv": (
        ["round", "rls_rps", "rls_p99_us", "rls_server_cpu_us", "rls_load_cpu_us", "http_rps",
         "http_p99_us", "http_server_cpu_us", "http_load_cpu_us", "ratio", "server_cpu_ratio"],
        rows)})


if __name__ == "__main__":
    main()
