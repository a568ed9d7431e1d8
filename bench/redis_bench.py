#!/usr/bin/env python3
"""make bench, Redis part: floodgate's Redis store against one script call per decision.

That ceiling is measured in the same run, with the Redis CPU each decision costs.

For each algorithm and for 1 and 100,000 keys, one round runs, back to back (in the
reverse order every other round):
  1. the ceiling: redis-benchmark running EVALSHA of a single-decision script at each
     depth of a sweep (clients x pipeline: -c 50 -P 32 and deeper), taking the best, as
     redis-benchmark's own users would tune it; not at floodgate's depth. The script is
     our own (lua/single.lua) and, for gcra, also bench/bare_single_gcra.lua: the least
     Lua that decides one gcra decision per call, what a user writing a lean
     one-script-per-decision limiter would run (ours pays per call for its chunk setup
     and argument validation). The ceiling is the better of the two at its best depth;
     both are reported. Before any run the bare script must answer as ours does on a
     few hand-made decisions (check_bare_single), or the bench refuses to run;
  2. floodgate bench with batching off (batch=1: that same script, one call per
     decision) at each of a few in-flight depths, taking the best;
  3. floodgate bench with batching on (batch=64: lua/batch.lua), likewise, with the
     p99 of its best run;
  4. redis-benchmark running lua/batch.lua with 64 decisions in every call, and, for
     gcra, bench/bare_batch_gcra.lua the same way: the least Lua that decides a batch
     of gcra keys, the floor the batch script's Redis CPU is measured against.
Every run reads Redis's CPU time (INFO cpu: used_cpu_sys + used_cpu_user) before and
after, and divides by the decisions it made: Redis CPU per decision, the figure that
does not depend on the machine or on the client competing for its cores. Ratios are
taken within a round, and the median of the rounds is reported. The denial cache is off
for these runs, so every decision costs a script call like redis-benchmark's (with one
key and the cache on, repeats of a denial never reach Redis at all; that row is reported
separately).

Then: the same server over its unix socket against TCP (gcra, batching off and on, Redis
and client CPU per decision); latency at a fixed offered load (open loop), and Redis memory
per key for each algorithm against a plain `SET key <integer> PX <ttl>` for the same key
names.
Starts its own redis-server on a free loopback port and stops it at the end. Every
redis-benchmark and floodgate run is bounded in requests and in time.
Short run: --algorithms gcra --keys 100000 --rounds 1 --seconds 2. The unix socket
against TCP alone: --transport-only; wait_replicas=0 against 1 (a replica attached) alone:
--durability-only.
"""
import argparse
import collections
import csv
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

HERE = os.path.dirname(os.path.abspath(__file__))
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
# lua/README.md, "Assembly": the batch script.
BATCH_FILES = ("common", "gcra", "token_bucket", "sliding_log", "sliding_window", "fixed_window",
               "batch")
BARE_GCRA = os.path.join(HERE, "bare_batch_gcra.lua")
BARE_SINGLE_GCRA = os.path.join(HERE, "bare_single_gcra.lua")

# Depths as CLIENTSxPIPELINE (redis-benchmark -c, -P) or THREADSxCONCURRENCY (floodgate
# bench --threads, --concurrency). The ceiling's sweep starts at -c 50 -P 32 and goes
# deeper; its best is the ceiling. Batched calls carry 64 decisions each, so far fewer
# calls in flight already keep Redis busy. floodgate runs at 256 and 1,024 decisions in
# flight (over its default 2 connections).
CEILING_DEPTHS = "50x32,50x64,100x64,50x128"
BATCH_CALL_DEPTHS = "2x8,8x8"
FLOODGATE_DEPTHS = "1x256,1x1024"
BATCH = 64  # decisions per batched call: floodgate's default (RedisOptions::max_batch)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server on loopback in its own temp dir (a free port unless given), with
    `extra_args` (cluster mode, say), and on a unix socket too (`self.socket`), so that
    one server can be measured over both; waits until it answers PING. Given
    `sentinel_config`, a `redis-server --sentinel` with that config file instead."""

    def __init__(self, port=None, extra_args=(), sentinel_config=None):
        self.dir = tempfile.mkdtemp(prefix="floodgate-bench-redis-")
        self.port = port or free_port()
        self.socket = os.path.join(self.dir, "redis.sock")
        sentinel = []
        if sentinel_config:
            sentinel = [os.path.join(self.dir, "sentinel.conf"), "--sentinel"]
            with open(sentinel[0], "w") as f:
                f.write(sentinel_config)
        self.proc = subprocess.Popen(
            ["redis-server", *sentinel, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--logfile", os.path.join(self.dir, "log"),
             "--unixsocket", self.socket, "--unixsocketperm", "700", *extra_args])
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

    def info(self, section):
        """INFO `section` as {field: text}."""
        return dict(line.split(":", 1) for line in self.cli("INFO", section).splitlines()
                    if ":" in line and not line.startswith("#"))

    def cpu_seconds(self):
        """CPU time the server has used so far, user + system (INFO cpu)."""
        cpu = self.info("cpu")
        return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])

    def error_replies(self):
        return int(self.info("stats")["total_error_replies"])

    def url(self, options=""):
        return f"redis://127.0.0.1:{self.port}" + (f"?{options}" if options else "")

    def unix_url(self, options=""):
        return f"redis+unix://{self.socket}" + (f"?{options}" if options else "")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def load_script(redis, paths):
    sha = redis.cli("SCRIPT", "LOAD", "".join(open(p).read() for p in paths)).strip()
    if len(sha) != 40:
        raise SystemExit(f"SCRIPT LOAD of {paths} failed: {sha}")
    return sha


def script_sha(redis, lua_dir, kind):
    return load_script(redis, [os.path.join(lua_dir, f"{name}.lua")
                               for name in ("common", SCRIPT_FILE[kind], "single")])


# (limit, period_us, burst, [(now, cost), ...]): decisions in order on one fresh key, each
# compared between the bare single gcra script and ours, then the stored tat too.
# T0 is an explicit now; '' is the server clock (only as a fresh key's one decision, so
# the answer does not depend on when it runs). 10/60s with burst 3: E = 6 s, tau = 18 s.
T0 = 1_700_000_000_000_000
BARE_SINGLE_CHECKS = [
    (10, 60_000_000, 3, [
        (T0, 0),                # peek a fresh key: {1, 3, 0, 0}
        (T0, 2),                # admit 2: {1, 1, 0, 12 s}
        (T0, 2),                # deny: {0, 1, 6 s, 12 s}
        (T0, 4),                # above the burst: {0, 1, -1, 12 s}
        (T0 + 1_000_000, 0),    # peek: {1, 1, 0, 11 s}
        (T0 + 3_000_000, 1),    # admit the last: {1, 0, 0, 15 s}
        (T0, 1),                # time went backwards: deny, {0, 0, 6 s, 18 s}
    ]),
    # 7/1000s: E = 142,857,143 µs (rounded up), so TTLs of minutes however slowly the
    # checks run: admit 7 at once, deny the 8th, admit once E has passed, not 1 µs sooner.
    (7, 1_000_000_000, 7, [(T0, 5), (T0, 2), (T0, 1), (T0 + 142_857_142, 1),
                           (T0 + 142_857_143, 1)]),
    (7, 1_000_000, 7, [("", 1)]),  # server clock: {1, 6, 0, 142,858}
    (7, 1_000_000, 7, [("", 0)]),  # {1, 7, 0, 0}
    (7, 1_000_000, 7, [("", 8)]),  # {0, 7, -1, 0}
]


def check_bare_single(redis, lua_dir):
    """Refuses to run (SystemExit) unless bench/bare_single_gcra.lua answers exactly as
    our gcra script does on BARE_SINGLE_CHECKS: a ceiling from a script that decided
    differently would be no ceiling. Returns the bare script's sha."""
    ours, bare = script_sha(redis, lua_dir, "gcra"), load_script(redis, [BARE_SINGLE_GCRA])
    for n, (limit, period, burst, decisions) in enumerate(BARE_SINGLE_CHECKS):
        keys = {sha: f"check:{name}:{n}" for name, sha in (("ours", ours), ("bare", bare))}
        redis.cli("DEL", *keys.values())
        for now, cost in decisions:
            answers = {sha: redis.cli("EVALSHA", sha, "1", key, "gcra", str(now), str(limit),
                                      str(period), str(burst), str(cost)).split()
                       for sha, key in keys.items()}
            if len(answers[ours]) != 4 or answers[ours] != answers[bare]:
                raise SystemExit(
                    f"bench/bare_single_gcra.lua disagrees with lua/single.lua on gcra "
                    f"{limit}/{period}us burst {burst}, now {now or 'server'}, cost {cost}: "
                    f"ours {answers[ours]}, bare {answers[bare]}")
        tats = [redis.cli("GET", key).strip() for key in keys.values()]
        if "" not in (now for now, _ in decisions) and tats[0] != tats[1]:
            raise SystemExit(f"bench/bare_single_gcra.lua stored tat {tats[1]}, ours {tats[0]}")
        redis.cli("DEL", *keys.values())
    return bare


def depths(text):
    """'50x32,50x64' -> [(50, 32), (50, 64)]"""
    return [tuple(int(n) for n in d.split("x")) for d in text.split(",") if d]


def single_command(sha, tag, kind, limit, period, burst, keys):
    """redis-benchmark's command for one decision in lua/single.lua's layout."""
    key = f"{tag}:{kind}:__rand_int__" if keys > 1 else f"{tag}:{kind}:one"
    return ["EVALSHA", sha, "1", key, kind, "", str(limit), str(period), str(burst), "1"]


def batch_command(sha, tag, kind, limit, period, burst, keys):
    """A call of BATCH decisions in lua/batch.lua's layout (one policy, no group, then
    policy number, now = '' (the server clock), cost = 1 per decision), each key drawn on its
    own from the keyspace (redis-benchmark replaces every __rand_int__ separately)."""
    key = f"{tag}:{kind}:__rand_int__" if keys > 1 else f"{tag}:{kind}:one"
    return (["EVALSHA", sha, str(BATCH)] + [key] * BATCH +
            ["1", kind, str(limit), str(period), str(burst), "0"] + ["1", "", "1"] * BATCH)


def redis_benchmark(redis, command, clients, pipeline, requests, keys, per_call, seconds):
    """One redis-benchmark run of `requests` calls of `command` (`per_call` decisions
    each) from `clients` clients pipelining `pipeline` each. Returns decisions/s, calls/s,
    the p99 of a call, and the CPU per decision of Redis and of redis-benchmark."""
    args = ["redis-benchmark", "-p", str(redis.port), "-c", str(clients), "-P", str(pipeline),
            "-n", str(requests), "--csv"]
    if keys > 1:
        args += ["-r", str(keys)]
    errors, cpu, client = redis.error_replies(), redis.cpu_seconds(), children_cpu_seconds()
    try:
        out = subprocess.run(args + command, capture_output=True, text=True,
                             timeout=10 * seconds + 30).stdout
    except subprocess.TimeoutExpired:
        raise SystemExit(f"redis-benchmark -c {clients} -P {pipeline} -n {requests} overran")
    client = children_cpu_seconds() - client  # before redis-cli runs again
    cpu = redis.cpu_seconds() - cpu
    if redis.error_replies() != errors:
        raise SystemExit(f"the script answered with errors under redis-benchmark: "
                         f"{redis.info('errorstats')}")
    rows = list(csv.reader(out.splitlines()))
    header = next((r for r in rows if r and r[0] == "test"), None)
    result = next((r for r in rows if r and r[0].startswith("EVALSHA")), None)
    if result is None:
        raise SystemExit(f"redis-benchmark printed no result: {out}")
    fields = dict(zip(header, result)) if header else {"rps": result[1]}
    calls = float(fields["rps"])
    return dict(depth=f"{clients}x{pipeline}", calls_per_sec=calls, rate=calls * per_call,
                p99_us=float(fields["p99_latency_ms"]) * 1000 if "p99_latency_ms" in fields
                else None,
                cpu_us=cpu * 1e6 / (requests * per_call),
                client_us=client * 1e6 / (requests * per_call))


def children_cpu_seconds():
    """CPU time of the client processes this script ran and waited for."""
    t = os.times()
    return t.children_user + t.children_system


def sweep(redis, command, depth_list, keys, per_call, seconds, estimate):
    """redis-benchmark at each depth for about `seconds` each: -n from the calls/s of
    the previous run of the same command (`estimate`, a one-item list it updates)."""
    points = []
    for clients, pipeline in depth_list:
        requests = max(4 * clients * pipeline, int(estimate[0] * seconds))
        point = redis_benchmark(redis, command, clients, pipeline, requests, keys, per_call,
                                seconds)
        estimate[0] = point["calls_per_sec"]
        points.append(point)
    return points


def floodgate_bench(binary, url, policy, keys, seconds, concurrency=64, threads=2, rate=0,
                    redis=None):
    """One `floodgate bench` run, with the CPU per decision of the client
    (`client_cpu_us`) and, given `redis`, of Redis (`redis_cpu_us`)."""
    args = [binary, "bench", "--store", url, "--policy", policy, "--keys", str(keys),
            "--threads", str(threads), "--concurrency", str(concurrency), "--duration",
            f"{round(seconds * 1000)}ms", "--json"]
    if rate:
        args += ["--rate", str(rate)]
    cpu, client = redis.cpu_seconds() if redis else 0, children_cpu_seconds()
    out = subprocess.run(args, capture_output=True, text=True, check=True,
                         timeout=seconds + 60).stdout
    client = children_cpu_seconds() - client  # before redis-cli runs again
    result = json.loads(out)
    if result["errors"]:
        raise SystemExit(f"floodgate bench reported errors: {out}")
    if redis:
        result["redis_cpu_us"] = (redis.cpu_seconds() - cpu) * 1e6 / result["decisions"]
    result["client_cpu_us"] = client * 1e6 / result["decisions"]
    result["depth"] = f"{threads}x{concurrency}"
    return result


def floodgate_depths(binary, redis, options, policy, keys, seconds, depth_list):
    """floodgate bench at each THREADSxCONCURRENCY, as points like sweep()'s."""
    points = []
    for threads, concurrency in depth_list:
        r = floodgate_bench(binary, redis.url(options), policy, keys, seconds,
                            concurrency=concurrency, threads=threads, redis=redis)
        if r["degraded"]:  # answered in process (on_error=local): not a Redis decision
            raise SystemExit(f"floodgate bench: {r['degraded']} decisions timed out: {r}")
        points.append(dict(depth=r["depth"], rate=r["decisions_per_sec"], p99_us=r["p99_us"],
                           cpu_us=r["redis_cpu_us"], client_us=r["client_cpu_us"],
                           per_call=r["decisions"] / max(1, r["store_calls"])))
    return points


TRANSPORTS = ("tcp", "unix")


def medians(runs):
    """The medians over `floodgate bench` runs of what the tables below show."""
    return dict(rate=statistics.median(r["decisions_per_sec"] for r in runs),
                p99=statistics.median(r["p99_us"] for r in runs),
                cpu=statistics.median(r["redis_cpu_us"] for r in runs),
                client=statistics.median(r["client_cpu_us"] for r in runs),
                per_call=statistics.median(r["decisions"] / max(1, r["store_calls"])
                                           for r in runs))


def transport_rows(binary, redis, key_counts, rounds, seconds):
    """gcra through `floodgate bench` over TCP and over the unix socket of the same server,
    batching off and on, at one depth (1x256), alternating which goes first: medians of
    `rounds` of decisions/s and of Redis and client CPU per decision."""
    rows = []
    for keys in key_counts:
        for batch in (1, BATCH):
            got = {t: [] for t in TRANSPORTS}
            for r in range(rounds):
                for transport in (TRANSPORTS if r % 2 == 0 else TRANSPORTS[::-1]):
                    options = f"batch={batch}&denial_cache=0us&timeout=1s&prefix=ft{batch}:"
                    url = redis.unix_url(options) if transport == "unix" else redis.url(options)
                    result = floodgate_bench(binary, url, "gcra:1000/1s", keys, seconds,
                                             concurrency=256, threads=1, redis=redis)
                    if result["degraded"]:
                        raise SystemExit(f"floodgate bench over {transport}: "
                                         f"{result['degraded']} decisions timed out: {result}")
                    got[transport].append(result)
            for transport in TRANSPORTS:
                rows.append(dict(keys=keys, batch=batch, transport=transport)
                            | medians(got[transport]))
            tcp, unix = rows[-2], rows[-1]
            print(f"  transport gcra {keys:>6} keys batch={batch:<3} decisions/s tcp "
                  f"{tcp['rate']:,.0f} unix {unix['rate']:,.0f}; Redis CPU µs/decision tcp "
                  f"{tcp['cpu']:.2f} unix {unix['cpu']:.2f}; client tcp {tcp['client']:.2f} "
                  f"unix {unix['client']:.2f}", file=sys.stderr)
    return rows


def transport_section(rows, rounds, seconds):
    """The markdown and CSV of transport_rows()."""
    md = ["\nOver the unix socket against TCP loopback: the same redis-server, gcra, "
          "`floodgate bench` at 1 thread x 256 in flight (2 connections, denial cache off), "
          f"batching off (batch=1) and on (batch={BATCH}), alternating which goes first; "
          f"medians of {rounds} runs of {seconds:g} s. Redis CPU per decision as above; "
          "client CPU is the floodgate process's.\n",
          "| keys | calls | transport | decisions/s | decisions / call | Redis CPU / decision | "
          "client CPU / decision |",
          "|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['keys']:,} | {'batch' if r['batch'] > 1 else 'single'} | "
                  f"{r['transport']} | {r['rate']:,.0f} | {r['per_call']:.1f} | "
                  f"{us(r['cpu'], 2)} | {us(r['client'], 2)} |")
    csvs = {"redis_transport.csv": (
        ["keys", "batch", "transport", "decisions_per_sec", "decisions_per_call",
         "redis_cpu_us_per_decision", "client_cpu_us_per_decision"],
        [[r["keys"], r["batch"], r["transport"], f"{r['rate']:.0f}", f"{r['per_call']:.2f}",
          f"{r['cpu']:.4f}", f"{r['client']:.4f}"] for r in rows])}
    return md, csvs


# (store, wait_replicas): redis:// without and with WAIT 1, and redis-sentinel://, which
# sends WAIT 0 behind every call (a replica refuses it).
DURABILITY = (("redis", 0), ("redis", 1), ("sentinel", 0))


def durability_rows(binary, redis, rounds, seconds):
    """gcra on 100,000 keys through `floodgate bench` with a replica attached, wait_replicas=0
    against 1 (WAIT 1 behind every script call), and through a sentinel monitoring the same
    server, batching off and on, at one depth (1x256), alternating the order: medians of
    `rounds` of decisions/s, p99 and Redis CPU per decision (the primary's)."""
    replica = Redis(extra_args=("--replicaof", "127.0.0.1", str(redis.port)))
    sentinel = Redis(sentinel_config=f"sentinel monitor fg 127.0.0.1 {redis.port} 1\n")
    rows = []
    try:
        deadline = time.time() + 10
        while replica.info("replication").get("master_link_status") != "up":
            if time.time() > deadline:
                raise SystemExit("the replica did not sync with the primary")
            time.sleep(0.05)
        for batch in (1, BATCH):
            got = {arm: [] for arm in DURABILITY}
            for r in range(rounds):
                for arm in (DURABILITY if r % 2 == 0 else DURABILITY[::-1]):
                    store, wait = arm
                    options = (f"batch={batch}&denial_cache=0us&timeout=1s&"
                               f"wait_replicas={wait}&prefix=fw{batch}:")
                    url = (redis.url(options) if store == "redis" else
                           f"redis-sentinel://127.0.0.1:{sentinel.port}/fg?{options}")
                    result = floodgate_bench(binary, url, "gcra:1000/1s", 100_000, seconds,
                                             concurrency=256, threads=1, redis=redis)
                    if result["degraded"]:
                        raise SystemExit(f"floodgate bench on {store} with wait_replicas={wait}: "
                                         f"{result['degraded']} decisions degraded: {result}")
                    got[arm].append(result)
            for store, wait in DURABILITY:
                rows.append(dict(batch=batch, store=store, wait=wait)
                            | medians(got[(store, wait)]))
            off, on, watched = rows[-3:]
            print(f"  durability gcra batch={batch:<3} decisions/s wait_replicas=0 "
                  f"{off['rate']:,.0f} =1 {on['rate']:,.0f} ({on['rate'] / off['rate']:.2f}x) "
                  f"sentinel {watched['rate']:,.0f} ({watched['rate'] / off['rate']:.2f}x); "
                  f"Redis CPU µs/decision {off['cpu']:.2f} / {on['cpu']:.2f} / "
                  f"{watched['cpu']:.2f}", file=sys.stderr)
    finally:
        replica.stop()
        sentinel.stop()
    return rows


def durability_section(rows, rounds, seconds):
    """The markdown and CSV of durability_rows()."""
    md = ["\nDurability (`wait_replicas=1`: `WAIT 1 <timeout>` sent behind every script call, "
          "the answer held until one replica acknowledged it; docs/stores.md, \"Redis "
          "Sentinel\"): the same redis-server with one replica attached on loopback, gcra on "
          "100,000 keys, `floodgate bench` at 1 thread x 256 in flight (2 connections, denial "
          f"cache off), batching off and on (batch={BATCH}), alternating which goes first; "
          f"medians of {rounds} runs of {seconds:g} s. Redis CPU is the primary's. The "
          "sentinel row reaches the same server through a sentinel (`redis-sentinel://`), "
          "which sends `WAIT 0` behind every call.\n",
          "| calls | store | wait_replicas | decisions/s | vs redis:// | p99 | decisions / call | "
          "Redis CPU / decision |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    base = {}
    for r in rows:
        base.setdefault(r["batch"], r["rate"])
        md.append(f"| {'batch' if r['batch'] > 1 else 'single'} | {r['store']} | {r['wait']} | "
                  f"{r['rate']:,.0f} | {r['rate'] / base[r['batch']]:.2f}x | {r['p99']:.0f} µs | "
                  f"{r['per_call']:.1f} | {us(r['cpu'], 2)} |")
    csvs = {"redis_durability.csv": (
        ["batch", "store", "wait_replicas", "decisions_per_sec", "p99_us", "decisions_per_call",
         "redis_cpu_us_per_decision"],
        [[r["batch"], r["store"], r["wait"], f"{r['rate']:.0f}", f"{r['p99']:.1f}", f"{r['per_call']:.2f}",
          f"{r['cpu']:.4f}"] for r in rows])}
    return md, csvs


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


# The runs of a round, in the order they go (reversed every other round), with the
# names the tables give them.
RUNS = {
    "single": "redis-benchmark, floodgate's single script",
    "single_bare": "redis-benchmark, bare single gcra script",
    "batch_off": "floodgate, batch=1",
    "batch_on": f"floodgate, batch={BATCH}",
    "batch_script": f"redis-benchmark, batch script ({BATCH}/call)",
    "bare": f"redis-benchmark, bare batched gcra ({BATCH}/call)",
}


# Which single script a ceiling came from, as the tables name it.
SINGLE_SCRIPTS = {"single": "floodgate's script", "single_bare": "bare gcra script"}


def best(points):
    return max(points, key=lambda p: p["rate"])


def summarize(got):
    """One table row from the rounds' runs: in each round the best depth of each run, the
    ceiling (the better of the single scripts at their best depths) and the ratios against
    it; then the median over rounds (the most frequent winner for a depth, and for the
    ceiling's script and depth together)."""
    rounds = []
    for i in range(len(got["single"])):
        own, off, on, script = (best(got[run][i]) for run in
                                ("single", "batch_off", "batch_on", "batch_script"))
        bare = best(got["bare"][i]) if "bare" in got else None
        lean = best(got["single_bare"][i]) if "single_bare" in got else None
        won = "single_bare" if lean and lean["rate"] > own["rate"] else "single"
        c = lean if won == "single_bare" else own
        rounds.append(dict(
            ceiling=c["rate"], ceiling_won=(won, c["depth"]), ceiling_p99=c["p99_us"],
            single_own=own["rate"], single_own_depth=own["depth"], single_own_p99=own["p99_us"],
            single_bare=lean and lean["rate"], single_bare_depth=lean and lean["depth"],
            cpu_single_bare=lean and lean["cpu_us"],
            single_overhead=lean and own["cpu_us"] - lean["cpu_us"],
            ratio_off_own=off["rate"] / own["rate"],
            batch_off=off["rate"], batch_off_depth=off["depth"], ratio_off=off["rate"] / c["rate"],
            batch_on=on["rate"], batch_on_depth=on["depth"], batch_on_p99=on["p99_us"],
            batch_on_per_call=on["per_call"], ratio_on=on["rate"] / c["rate"],
            cpu_single=own["cpu_us"], cpu_off=off["cpu_us"], cpu_on=on["cpu_us"],
            client_ceiling=c["client_us"], client_off=off["client_us"], client_on=on["client_us"],
            cpu_script=script["cpu_us"], script_rate=script["rate"],
            cpu_bare=bare and bare["cpu_us"], bare_rate=bare and bare["rate"],
            script_over_bare=bare and script["cpu_us"] / bare["cpu_us"]))
    row = {}
    for field in rounds[0]:
        values = [r[field] for r in rounds]
        if field.endswith(("_depth", "_won")):
            row[field] = collections.Counter(values).most_common(1)[0][0]
        elif None in values:
            row[field] = None
        else:
            row[field] = statistics.median(values)
    row["ceiling_script"], row["ceiling_depth"] = row.pop("ceiling_won")
    return row


def per_depth(name, keys, got):
    """Every depth of every run, medians over rounds: the CSV behind the winners."""
    out = []
    for run, rounds in got.items():
        for i, point in enumerate(rounds[0]):
            points = [r[i] for r in rounds]

            def med(field):
                if points[0].get(field) is None:
                    return None
                return statistics.median(p[field] for p in points)

            out.append(dict(algorithm=name, keys=keys, run=run, depth=point["depth"],
                            rate=med("rate"), p99=med("p99_us"), cpu=med("cpu_us"),
                            client=med("client_us"),
                            per_call=med("per_call") if "per_call" in point else BATCH
                            if run in ("batch_script", "bare") else 1))
    return out


def rb_depth(depth):
    clients, pipeline = depth.split("x")
    return f"-c {clients} -P {pipeline}"


def ceiling_by(row):
    """'bare gcra script, -c 50 -P 64': the script and depth the ceiling came from."""
    return f"{SINGLE_SCRIPTS[row['ceiling_script']]}, {rb_depth(row['ceiling_depth'])}"


def fg_depth(depth):
    threads, concurrency = (int(n) for n in depth.split("x"))
    return f"{threads * concurrency:,} in flight" + (f" ({threads} threads)" if threads > 1 else "")


def ceiling_notes(rows):
    """What the table's ceilings are for the algorithms without a bare single script,
    with the per-call overhead of floodgate's script measured on gcra in the same run."""
    gcra = [r for r in rows if r["single_overhead"] is not None]
    others = list(dict.fromkeys(r["algorithm"] for r in rows if r["single_bare"] is None))
    notes = []
    if gcra:
        notes.append(
            "For gcra, floodgate with batching off against floodgate's own script at its best "
            "depth (the same script, so the difference is the client): "
            + "; ".join(f"{r['ratio_off_own']:.2f}x at {key_count(r)}" for r in gcra) + ".")
    if others:
        notes.append(
            f"For {', '.join(others)} there is no bare single script: the ceiling is "
            "floodgate's own single script, which carries per-call overhead the bare gcra one "
            "does not (every call builds common.lua's helpers again, 14 closures plus the "
            "algorithm's own, and validates every argument), so those ceilings are lower "
            "than a lean one-decision script would reach and their ratios read higher than "
            "against one. "
            + ("Measured on gcra in this run, that overhead is "
               + "; ".join(f"{r['single_overhead']:.2f} µs of Redis CPU per call at "
                           f"{key_count(r)} ({r['cpu_single']:.2f} µs for floodgate's "
                           f"script, {r['cpu_single_bare']:.2f} µs for the bare one)"
                           for r in gcra) + "."
               if gcra else "(gcra was not in this run, so that overhead was not measured.)"))
    return ["\n" + " ".join(notes)] if notes else []


def key_count(row):
    return f"{row['keys']:,} key" + ("s" if row["keys"] != 1 else "")


def us(x, digits=0):
    return "–" if x is None else f"{x:,.{digits}f} µs"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--lua", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="length of each redis-benchmark point and each floodgate run")
    parser.add_argument("--algorithms", default="",
                        help="comma-separated names or kind tags (gcra,tb,...); default all")
    parser.add_argument("--keys", default="1,100000", help="comma-separated key counts")
    parser.add_argument("--ceiling-depths", default=CEILING_DEPTHS,
                        help="redis-benchmark CLIENTSxPIPELINE for the single script")
    parser.add_argument("--batch-depths", default=BATCH_CALL_DEPTHS,
                        help=f"redis-benchmark CLIENTSxPIPELINE for calls of {BATCH} decisions")
    parser.add_argument("--floodgate-depths", default=FLOODGATE_DEPTHS,
                        help="floodgate bench THREADSxCONCURRENCY")
    parser.add_argument("--transport-only", action="store_true",
                        help="only the unix socket against TCP (redis_transport.md)")
    parser.add_argument("--durability-only", action="store_true",
                        help="only wait_replicas=0 against 1 (redis_durability.md)")
    args = parser.parse_args()
    wanted = {a.strip() for a in args.algorithms.split(",") if a.strip()}
    chosen = [a for a in ALGORITHMS if not wanted or a[0] in wanted or a[1] in wanted]
    if not chosen:
        raise SystemExit(f"--algorithms {args.algorithms}: none of {[a[1] for a in ALGORITHMS]}")
    key_counts = [int(k) for k in args.keys.split(",")]
    ceiling_depths, call_depths, fg_depths = (
        depths(d) for d in (args.ceiling_depths, args.batch_depths, args.floodgate_depths))

    redis = Redis()
    if args.transport_only:
        try:
            rows = transport_rows(args.floodgate, redis, key_counts, args.rounds, args.seconds)
        finally:
            redis.stop()
        md, csvs = transport_section(rows, args.rounds, args.seconds)
        part_output.save(args.out, "redis_transport.md", md, csvs)
        return
    if args.durability_only:
        try:
            rows = durability_rows(args.floodgate, redis, args.rounds, args.seconds)
        finally:
            redis.stop()
        md, csvs = durability_section(rows, args.rounds, args.seconds)
        part_output.save(args.out, "redis_durability.md", md, csvs)
        return
    rows, detail, latency, memory = [], [], [], []
    try:
        version = redis.info("server")["redis_version"]
        batch_sha = load_script(redis, [os.path.join(args.lua, f"{n}.lua") for n in BATCH_FILES])
        bare_sha = load_script(redis, [BARE_GCRA])
        if any(kind == "gcra" for _, kind, *_ in chosen):
            bare_single_sha = check_bare_single(redis, args.lua)
        estimates = {}  # calls/s of the last run of each command, to size the next one's -n
        for name, kind, policy, limit, period, burst in chosen:
            sha = script_sha(redis, args.lua, kind)
            for keys in key_counts:
                def rb(run, command, depth_list, per_call, guess):
                    return lambda: sweep(redis, command, depth_list, keys, per_call, args.seconds,
                                         estimates.setdefault((run, kind, keys), [guess]))

                # timeout=1s: at 1,024 in flight on a busy machine some answers take
                # longer than the default 50 ms, and on_error=local would then answer them
                # in process, which is no Redis decision (floodgate_depths refuses that).
                def fg(batch):
                    return lambda: floodgate_depths(
                        args.floodgate, redis, f"batch={batch}&denial_cache=0us&timeout=1s&prefix=fb{batch}:",
                        policy, keys, args.seconds, fg_depths)

                runs = {
                    "single": rb("single", single_command(sha, "rb", kind, limit, period, burst,
                                                          keys), ceiling_depths, 1, 100_000),
                }
                if kind == "gcra":  # the same sweep, with the least Lua for one decision
                    runs["single_bare"] = rb("single_bare", single_command(
                        bare_single_sha, "rbs", kind, limit, period, burst, keys), ceiling_depths,
                        1, 100_000)
                runs |= {
                    "batch_off": fg(1),
                    "batch_on": fg(BATCH),
                    "batch_script": rb("batch_script", batch_command(
                        batch_sha, "rbb", kind, limit, period, burst, keys), call_depths, BATCH,
                        3_000),
                }
                if kind == "gcra":
                    runs["bare"] = rb("bare", batch_command(bare_sha, "bare", kind, limit, period,
                                                            burst, keys), call_depths, BATCH, 3_000)
                got = {run: [] for run in runs}
                for r in range(args.rounds):
                    redis.cli("FLUSHALL")
                    for run in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                        got[run].append(runs[run]())
                row = summarize(got) | dict(algorithm=name, keys=keys)
                rows.append(row)
                detail += per_depth(name, keys, got)
                print(f"  {name:<24} {keys:>6} keys  ceiling {row['ceiling']:>9.0f}/s "
                      f"({ceiling_by(row)})  batch off {row['batch_off']:>9.0f}/s "
                      f"({row['ratio_off']:.2f}x)  batch on {row['batch_on']:>9.0f}/s "
                      f"({row['ratio_on']:.2f}x, p99 {row['batch_on_p99']:.0f} µs)  Redis CPU "
                      f"µs/decision: single {row['cpu_single']:.2f}"
                      + (f", bare single {row['cpu_single_bare']:.2f}"
                         if row["cpu_single_bare"] else "")
                      + f", batch {row['cpu_on']:.2f}"
                      + (f", bare batch {row['cpu_bare']:.2f}" if row["cpu_bare"] else ""),
                      file=sys.stderr)
        transport = transport_rows(args.floodgate, redis, key_counts, args.rounds, args.seconds)
        durability = durability_rows(args.floodgate, redis, args.rounds, args.seconds)
        cached = floodgate_bench(args.floodgate, redis.url("prefix=fbc:"), "fixed_window:1000/1s",
                                 1, args.seconds)
        for batch in (1, BATCH):
            runs = [floodgate_bench(args.floodgate,
                                    redis.url(f"batch={batch}&denial_cache=0us&prefix=fl:"),
                                    "gcra:1000/1s", 100_000, 3, concurrency=256, threads=1,
                                    rate=50_000)
                    for _ in range(args.rounds)]
            latency.append({k: statistics.median(r[f] for r in runs) for k, f in
                            (("rate", "decisions_per_sec"), ("p50", "p50_us"), ("p99", "p99_us"),
                             ("p999", "p999_us"), ("degraded", "degraded"))} | dict(batch=batch))
        for name, kind, *_ in chosen:
            ours, plain = memory_per_key(redis, args.lua, kind, 100_000)
            memory.append(dict(algorithm=name, ours=ours, plain=plain, ratio=ours / plain))
            print(f"  memory {name:<24} {ours:.1f} B/key vs plain SET {plain:.1f} "
                  f"({ours / plain:.2f}x)", file=sys.stderr)
    finally:
        redis.stop()

    md = [f"### Redis store ({time.strftime('%Y-%m-%d')}, Redis {version}, "
          f"{os.cpu_count()} cores shared by server and client)\n",
          "Decisions/s. Ceiling = `redis-benchmark` running EVALSHA of a single-decision "
          "script at the depth where it does best (the best of "
          f"{', '.join(rb_depth(f'{c}x{p}') for c, p in ceiling_depths)}): for gcra the "
          "better of two scripts, each at its own best depth, floodgate's own "
          "(`lua/single.lua`, what floodgate runs with batching off) and "
          "`bench/bare_single_gcra.lua`, the least Lua that decides one gcra decision per "
          "call with the same arguments and reply (no validation, no helpers; the run first "
          "checks that it answers as ours does); for the other algorithms floodgate's own. "
          "Both single scripts are shown, and the ceiling column names the one that won. "
          "floodgate: "
          "`floodgate bench` (its default 2 connections, denial cache off) at "
          f"{' and '.join(fg_depth(f'{t}x{c}') for t, c in fg_depths)}, taking the best: "
          "batching off (batch=1: the same script, one call per decision) and on "
          f"(batch={BATCH}: lua/batch.lua, up to {BATCH} decisions per call; its p99 and "
          "decisions per call are from its best run). Ratios are taken within each round; "
          f"medians of {args.rounds} rounds, each run {args.seconds:g} s; the depth shown won "
          "most rounds. Target: batching on >= 1.5x the ceiling. Batching off runs floodgate's "
          "own script once per decision, so it cannot pass a ceiling set by a leaner script: "
          "it is measured against its own script at its best depth below (target >= 0.8x: "
          "what the client costs), and the Redis CPU table shows what the script's own "
          "per-call overhead costs.\n",
          "| algorithm | keys | ceiling (script, depth) | ceiling p99 | "
          "single: floodgate's script (depth) | single: bare gcra script (depth) | "
          f"batch off (depth) | ratio | batch on (depth) | p99 | decisions / call | ratio |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        bare_single = ("–" if r["single_bare"] is None else
                       f"{r['single_bare']:,.0f} ({rb_depth(r['single_bare_depth'])})")
        md.append(f"| {r['algorithm']} | {r['keys']:,} | {r['ceiling']:,.0f} "
                  f"({ceiling_by(r)}) | {us(r['ceiling_p99'])} | "
                  f"{r['single_own']:,.0f} ({rb_depth(r['single_own_depth'])}) | {bare_single} | "
                  f"{r['batch_off']:,.0f} ({fg_depth(r['batch_off_depth'])}) | "
                  f"{r['ratio_off']:.2f} | {r['batch_on']:,.0f} ({fg_depth(r['batch_on_depth'])}) | "
                  f"{us(r['batch_on_p99'])} | {r['batch_on_per_call']:.1f} | "
                  f"**{r['ratio_on']:.2f}** |")
    md += ceiling_notes(rows)
    md += ["\nRedis CPU per decision (`INFO cpu` `used_cpu_sys` + `used_cpu_user`, delta over "
           "each run, divided by the decisions it made): the figure that does not depend on "
           "the machine's cores or on the client competing for them. Single script: "
           "redis-benchmark at its best depth, floodgate's script and (gcra) the bare one, "
           "whose difference is what floodgate's script costs Redis per call beyond the "
           "decision; and floodgate with batching off. Batch script: "
           f"floodgate with batching on (its own mix of call sizes), and redis-benchmark sending "
           f"calls of exactly {BATCH} decisions (best of "
           f"{', '.join(rb_depth(f'{c}x{p}') for c, p in call_depths)}). Bare batched gcra: "
           "`bench/bare_batch_gcra.lua`, the least Lua that decides the same calls (same "
           "arguments and reply, no validation, no dispatch), driven the same way: the floor "
           "the batch script should approach. Client CPU per decision (the client processes' "
           "own CPU time; for redis-benchmark, its run that set the ceiling) tells how much "
           "of the 2 cores the client leaves to Redis.\n",
           "| algorithm | keys | single: floodgate's script | single: bare gcra script | "
           "floodgate's − bare | single: floodgate batch off | "
           f"batch: floodgate batch on | batch: redis-benchmark {BATCH}/call | "
           f"bare batched gcra {BATCH}/call | batch / bare | client: redis-benchmark | "
           "client: floodgate batch off | client: floodgate batch on |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['algorithm']} | {r['keys']:,} | {us(r['cpu_single'], 2)} | "
                  f"{us(r['cpu_single_bare'], 2)} | {us(r['single_overhead'], 2)} | "
                  f"{us(r['cpu_off'], 2)} | {us(r['cpu_on'], 2)} | {us(r['cpu_script'], 2)} | "
                  f"{us(r['cpu_bare'], 2)} | "
                  + ("–" if r["script_over_bare"] is None else f"**{r['script_over_bare']:.2f}**")
                  + f" | {us(r['client_ceiling'], 2)} | {us(r['client_off'], 2)} | "
                  f"{us(r['client_on'], 2)} |")
    md.append("\nEvery depth of every run (decisions/s, p99, Redis and client CPU per "
              "decision) is in `redis_depths.csv`.\n")
    transport_md, transport_csvs = transport_section(transport, args.rounds, args.seconds)
    md += transport_md
    durability_md, durability_csvs = durability_section(durability, args.rounds, args.seconds)
    md += durability_md
    md.append(f"One key under `fixed_window:1000/1s` with the denial cache on (the default): "
              f"{cached['decisions_per_sec']:,.0f} decisions/s, since repeated denials are "
              f"answered in process.\n")
    md += ["Latency at a fixed offered load of 50,000 decisions/s (open loop; latency counts "
           f"from each request's due time), gcra, 100,000 keys; medians of {args.rounds} runs "
           "of 3 s, with the store's default 50 ms timeout (degraded: answers given in process "
           "by on_error=local after it):\n",
           "| batching | achieved/s | p50 | p99 | p999 | degraded |", "|---|---:|---:|---:|---:|---:|"]
    for l in latency:
        md.append(f"| {'off' if l['batch'] == 1 else f'on ({BATCH})'} | {l['rate']:,.0f} | "
                  f"{l['p50']:.0f} µs | {l['p99']:.0f} µs | {l['p999']:.0f} µs | "
                  f"{l['degraded']:,.0f} |")
    md += ["\nRedis memory per key (`INFO memory` delta over 100,000 keys), against a plain "
           "`SET key <integer> PX <ttl>` for exactly the same key names (`fg:<tag>:user:N`, "
           "each written by one decision). Targets: gcra and "
           "fixed_window <= 1.15x, token_bucket and sliding_window <= 1.3x.\n",
           "| algorithm | floodgate | plain SET | ratio |", "|---|---:|---:|---:|"]
    for m in memory:
        md.append(f"| {m['algorithm']} | {m['ours']:.1f} B | {m['plain']:.1f} B | **{m['ratio']:.2f}** |")

    def num(x, fmt):
        return "" if x is None else format(x, fmt)

    part_output.save(args.out, "redis.md", md, {
        "redis.csv": (
            ["algorithm", "keys", "ceiling_per_sec", "ceiling_depth", "ceiling_p99_us",
             "batch_off_per_sec", "batch_off_depth", "ratio_off", "batch_on_per_sec",
             "batch_on_depth", "batch_on_p99_us", "batch_on_decisions_per_call", "ratio_on",
             "redis_cpu_us_single_redis_benchmark", "redis_cpu_us_single_batch_off",
             "redis_cpu_us_batch_on", "redis_cpu_us_batch_script_redis_benchmark",
             "redis_cpu_us_bare_batch_gcra", "batch_script_over_bare",
             "client_cpu_us_redis_benchmark", "client_cpu_us_batch_off", "client_cpu_us_batch_on",
             "ceiling_script", "single_own_per_sec", "single_own_depth", "single_own_p99_us",
             "single_bare_gcra_per_sec", "single_bare_gcra_depth",
             "redis_cpu_us_single_bare_gcra", "redis_cpu_us_single_own_minus_bare",
             "ratio_off_vs_own_single"],
            [[r["algorithm"], r["keys"], f"{r['ceiling']:.0f}", r["ceiling_depth"],
              num(r["ceiling_p99"], ".1f"), f"{r['batch_off']:.0f}", r["batch_off_depth"],
              f"{r['ratio_off']:.4f}", f"{r['batch_on']:.0f}", r["batch_on_depth"],
              f"{r['batch_on_p99']:.1f}", f"{r['batch_on_per_call']:.2f}", f"{r['ratio_on']:.4f}",
              f"{r['cpu_single']:.4f}", f"{r['cpu_off']:.4f}", f"{r['cpu_on']:.4f}",
              f"{r['cpu_script']:.4f}", num(r["cpu_bare"], ".4f"),
              num(r["script_over_bare"], ".4f"), f"{r['client_ceiling']:.4f}",
              f"{r['client_off']:.4f}", f"{r['client_on']:.4f}",
              SINGLE_SCRIPTS[r["ceiling_script"]], f"{r['single_own']:.0f}",
              r["single_own_depth"], num(r["single_own_p99"], ".1f"),
              num(r["single_bare"], ".0f"), r["single_bare_depth"] or "",
              num(r["cpu_single_bare"], ".4f"), num(r["single_overhead"], ".4f"),
              f"{r['ratio_off_own']:.4f}"] for r in rows]),
        "redis_depths.csv": (
            ["algorithm", "keys", "run", "depth", "decisions_per_sec", "p99_us",
             "redis_cpu_us_per_decision", "client_cpu_us_per_decision", "decisions_per_call"],
            [[d["algorithm"], d["keys"], RUNS[d["run"]], d["depth"], f"{d['rate']:.0f}",
              num(d["p99"], ".1f"), f"{d['cpu']:.4f}", f"{d['client']:.4f}", f"{d['per_call']:.2f}"]
             for d in detail]),
        "redis_latency.csv": (
            ["batch", "achieved_per_sec", "p50_us", "p99_us", "p999_us", "degraded"],
            [[l["batch"], f"{l['rate']:.0f}", f"{l['p50']:.1f}", f"{l['p99']:.1f}",
              f"{l['p999']:.1f}", f"{l['degraded']:.0f}"] for l in latency]),
        "redis_memory.csv": (
            ["algorithm", "floodgate_bytes_per_key", "plain_set_bytes_per_key", "ratio"],
            [[m["algorithm"], f"{m['ours']:.1f}", f"{m['plain']:.1f}", f"{m['ratio']:.4f}"]
             for m in memory]),
    } | transport_csvs | durability_csvs)


if __name__ == "__main__":
    main()
