#!/usr/bin/env python3
"""make bench, reservations and leases: what holding costs next to one Check.

Reservations (docs/reservations.md) and leases (docs/leases.md): what a request that reserves and
settles, or acquires and releases, costs next to one Check.

`floodgate bench` on memory:// (1 thread, decided inline) and on a redis-server it starts
(batching on, 1,024 in flight), 100,000 keys, five runs back to back in each round (the
order reversed every other round):
  check            --mode check --policy gcra:1000000/1s: one decision per request;
  reserve          --mode reserve, same policy: Reserve 1, then Settle it at 0 (a refund)
                   once admitted;
  check_log        --mode check --policy sliding_log:100000/1s: one decision of the
                   sliding log, whose rule a lease follows (docs/leases.md);
  acquire          --mode acquire --policy concurrency:100,lease=30s: Acquire, then
                   Release;
  acquire_one_key  the same on one key (concurrency:100000): every lease in flight on
                   one key, so most releases are of a lease among many held.
The ratios (check/s over reserve/s; check_log/s and check/s over acquire/s; acquire/s
over acquire_one_key/s) are taken within each round and their medians reported (target
<= 2.2x for the first three). A sliding_log check on a random key adds a run its log
keeps for the period, while an acquire's lease goes with its release: the log a check
keeps is longer, which is why both bases are shown. Every request was answered by the
store (errors or degraded answers refuse the run) and admitted (fewer than 99% refuses
it: the measured path is the admitting one, which holds and settles).
Then the scripts alone (script_costs): Redis's CPU per request for floodgate's check and
reserve + settle scripts and for the bare floors (bench/bare_*.lua), driven alike.
Short run: --rounds 1 --seconds 1.
"""
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from redis_bench import Redis, load_script  # a redis-server on a free loopback port

HERE = os.path.dirname(os.path.abspath(__file__))
# Every algorithm file, in the order the store assembles its driver scripts
# (src/store/redis/lua_sources.h, DriverScript).
ALGORITHM_FILES = ["gcra", "token_bucket", "sliding_log", "sliding_window", "fixed_window",
                   "concurrency"]
POLICY = ["gcra", "1000000", "1000000", "1000000"]  # gcra:1000000/1s, as sent to Redis
LEASE_LIMIT, LEASE_US = 100, 30_000_000  # concurrency:100,lease=30s, as the runs above
LEASE_POLICY = ["cc", str(LEASE_LIMIT), str(LEASE_US), str(LEASE_LIMIT)]
OPS_PER_CALL = 64  # floodgate's batch size in the runs above
CALLS_PER_PIPELINE = 8

VARIANTS = {
    "check": ["--mode", "check", "--policy", "gcra:1000000/1s"],
    "reserve": ["--mode", "reserve", "--actual", "0", "--policy", "gcra:1000000/1s"],
    "check_log": ["--mode", "check", "--policy", "sliding_log:100000/1s"],
    "acquire": ["--mode", "acquire", "--policy", "concurrency:100,lease=30s"],
    # One key holding every lease in flight (1,024 on Redis): a release among many held.
    "acquire_one_key": ["--mode", "acquire", "--policy", "concurrency:100000,lease=30s",
                        "--keys", "1"],
}
RATIOS = {"reserve + settle / check": ("check", "reserve"),
          "acquire + release / check (sliding_log)": ("check_log", "acquire"),
          "acquire + release / check (gcra)": ("check", "acquire"),
          "acquire + release, 100,000 keys / one key": ("acquire", "acquire_one_key")}


def bench(binary, url, variant, keys, concurrency, seconds):
    flags = VARIANTS[variant]
    if "--keys" not in flags:
        flags = flags + ["--keys", str(keys)]
    out = subprocess.run([binary, "bench", "--store", url, *flags, "--threads", "1",
                          "--concurrency", str(concurrency),
                          "--duration", f"{round(seconds * 1000)}ms", "--json"],
                         capture_output=True, text=True, check=True,
                         timeout=seconds + 60).stdout
    result = json.loads(out)
    n = result["decisions"]
    if result["errors"] or result["degraded"] or result["allowed"] < 0.99 * n:
        raise SystemExit(f"reserve_bench: {variant} on {url}: errors, degraded or denied "
                         f"answers: {out}")
    return result


class Resp:
    """One RESP connection, commands written in pipelines: enough to drive scripts
    without a client library (none is a Debian package this project uses)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = self.sock.makefile("rb")

    def pipeline(self, commands):
        out = []
        for command in commands:
            out.append(b"*%d\r\n" % len(command))
            for arg in command:
                arg = arg.encode() if isinstance(arg, str) else arg
                out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
        self.sock.sendall(b"".join(out))
        return [self.read() for _ in commands]

    def read(self):
        line = self.reader.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise SystemExit(f"reserve_bench: Redis answered an error: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.reader.read(size + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        return rest.decode()

    def close(self):
        self.sock.close()


def script_costs(redis, lua_dir, keys, seconds):
    """Redis CPU per request of floodgate's scripts and of the bare floors, driven alike.

    The same Python driver sends floodgate's own lua/batch.lua (checks) and
    lua/reservation.lua (reserves, then settles of the previous pipeline's records; then
    acquires under concurrency:100,lease=30s and their releases, by the member a lease id
    carries, as src/store/redis sends them), then
    bench/bare_batch_gcra.lua, bench/bare_reserve_gcra.lua + bench/bare_settle_gcra.lua
    and bench/bare_acquire_cc.lua + bench/bare_release_cc.lua the same way: 64 operations
    per call, 8 calls per pipeline, gcra:1000000/1s on `keys` random keys (the leases on
    as many concurrency keys), each run bounded by `seconds` and a call count. Redis CPU
    (INFO cpu) over the requests is what the server spent, whoever drives it. The bare
    scripts are the least Lua doing the same work: a record per reservation, so their
    ratio is the floor any script keeping such records pays on this Redis; for leases, the
    issue's sorted set alone, as floodgate keeps it (no record: the lease's id carries its
    key and member), the floor of any acquire + release on that sorted set. Every reserve and acquire must be admitted, every settle and
    release find its record or lease.
    """
    shared = [os.path.join(lua_dir, f"{name}.lua") for name in ["common"] + ALGORITHM_FILES]
    scripts = {
        "check": load_script(redis, shared + [os.path.join(lua_dir, "batch.lua")]),
        "reserve": load_script(redis, shared + [os.path.join(lua_dir, "reservation.lua")]),
        "bare check": load_script(redis, [os.path.join(HERE, "bare_batch_gcra.lua")]),
        "bare reserve": load_script(redis, [os.path.join(HERE, "bare_reserve_gcra.lua")]),
        "bare settle": load_script(redis, [os.path.join(HERE, "bare_settle_gcra.lua")]),
        "bare acquire": load_script(redis, [os.path.join(HERE, "bare_acquire_cc.lua")]),
        "bare release": load_script(redis, [os.path.join(HERE, "bare_release_cc.lua")]),
    }
    rng = random.Random(1)
    conn = Resp(redis.port)
    max_pipelines = 100_000

    def key():
        return f"fgb:gcra:k{rng.randrange(keys)}"

    def lease_key():
        return f"fgb:cc:k{rng.randrange(keys)}"

    def check_call(sha):
        argv = ["1", *POLICY, "0"] + ["1", "", "1"] * OPS_PER_CALL
        return ["EVALSHA", sha, str(OPS_PER_CALL)] + [key() for _ in range(OPS_PER_CALL)] + argv

    def reserve_call(sha, records):
        keys_ = []
        for _ in range(OPS_PER_CALL):
            record = f"fgb:res:{{x}}:{rng.getrandbits(64):016x}"
            keys_ += [key(), record]
            records.append(record)
        argv = ["1", *POLICY, str(OPS_PER_CALL)] + ["r", "1", "", "1", "300000000"] * OPS_PER_CALL
        return ["EVALSHA", sha, str(2 * OPS_PER_CALL)] + keys_ + argv

    def settle_call(sha, records):
        argv = ["0", str(len(records))] + ["s", "", "0"] * len(records)
        return ["EVALSHA", sha, str(len(records))] + records + argv

    def expect(replies, per_op, what):
        """Every operation admitted: a check's first integer (allowed), a reserve's or
        settle's first two (done, allowed)."""
        flags = 1 if per_op == 4 else 2
        for reply in replies:
            for o in range(0, len(reply) - 1, per_op):
                if reply[o:o + flags] != [1] * flags:
                    raise SystemExit(f"reserve_bench: a {what} was not done and admitted: "
                                     f"{reply[o:o + per_op]}")

    def checks(sha):
        requests, deadline = 0, time.monotonic() + seconds
        for _ in range(max_pipelines):
            if time.monotonic() >= deadline:
                break
            replies = conn.pipeline([check_call(sha) for _ in range(CALLS_PER_PIPELINE)])
            expect(replies, 4, "check")
            requests += CALLS_PER_PIPELINE * OPS_PER_CALL
        return requests

    def reserves_and_settles(reserve_sha, settle_sha, fields):
        """Reserves, then settles of the previous pipeline's records; `fields` integers
        per operation in their replies (floodgate's 7, the bare scripts' 6)."""
        requests, pending = 0, []
        deadline = time.monotonic() + seconds
        for _ in range(max_pipelines):
            if time.monotonic() >= deadline:
                break
            made = [[] for _ in range(CALLS_PER_PIPELINE)]
            commands = [reserve_call(reserve_sha, m) for m in made]
            commands += [settle_call(settle_sha, records) for records in pending]
            replies = conn.pipeline(commands)
            expect(replies[:CALLS_PER_PIPELINE], fields, "reserve")
            expect(replies[CALLS_PER_PIPELINE:], fields, "settle")
            requests += sum(len(records) for records in pending)
            pending = made
        replies = conn.pipeline([settle_call(settle_sha, records) for records in pending])
        expect(replies, fields, "settle")
        return requests + sum(len(records) for records in pending)

    def acquires_and_releases(acquire_call, release_call, release_fields, what):
        """Acquires (acquire_call(keys, randoms): 7 integers per lease, its acquire time
        last), then releases of the previous pipeline's leases (release_call(keys,
        [(random, acquire time)]): what a lease id carries)."""
        requests, pending = 0, []
        deadline = time.monotonic() + seconds
        for _ in range(max_pipelines):
            if time.monotonic() >= deadline:
                break
            made = [([lease_key() for _ in range(OPS_PER_CALL)],
                     [f"{rng.getrandbits(64):016x}" for _ in range(OPS_PER_CALL)])
                    for _ in range(CALLS_PER_PIPELINE)]
            commands = [acquire_call(k, r) for k, r in made]
            commands += [release_call(k, leases) for k, leases in pending]
            replies = conn.pipeline(commands)
            expect(replies[:CALLS_PER_PIPELINE], 7, f"{what} acquire")
            expect(replies[CALLS_PER_PIPELINE:], release_fields, f"{what} release")
            requests += sum(len(k) for k, _ in pending)
            pending = [(k, [(r[j], reply[7 * j + 6]) for j in range(len(k))])
                       for (k, r), reply in zip(made, replies[:CALLS_PER_PIPELINE])]
        replies = conn.pipeline([release_call(k, leases) for k, leases in pending])
        expect(replies, release_fields, f"{what} release")
        return requests + sum(len(k) for k, _ in pending)

    def floodgate_acquires_and_releases():
        """lua/reservation.lua's acquires and releases, as src/store/redis sends them."""
        sha = scripts["reserve"]
        middle = f".{LEASE_US}.{LEASE_LIMIT}."

        def acquire_call(k, randoms):
            return (["EVALSHA", sha, str(len(k)), *k, "1", *LEASE_POLICY, str(len(k))] +
                    [x for r in randoms for x in ("a", "1", r)])

        def release_call(k, leases):
            return (["EVALSHA", sha, str(len(k)), *k, "0", str(len(k))] +
                    [x for r, at in leases for x in ("l", f"{r}{middle}{at}")])
        return acquires_and_releases(acquire_call, release_call, 7, "floodgate")

    def bare_acquires_and_releases():
        """bench/bare_acquire_cc.lua, then bench/bare_release_cc.lua: (key, member,
        acquire time) each, as a lease id carries them."""
        acquire, release = scripts["bare acquire"], scripts["bare release"]
        head = [str(LEASE_LIMIT), str(LEASE_US)]

        def acquire_call(k, randoms):
            return ["EVALSHA", acquire, str(len(k)), *k, *head, *(r + "." for r in randoms)]

        def release_call(k, leases):
            return ["EVALSHA", release, str(len(k)), *k, *head,
                    *(x for r, at in leases for x in (f"{r}.{at}", str(at)))]
        return acquires_and_releases(acquire_call, release_call, 6, "bare")

    def cpu_per_request(run):
        before = redis.cpu_seconds()
        requests = run()
        return (redis.cpu_seconds() - before) * 1e6 / requests

    try:
        return {
            "check": cpu_per_request(lambda: checks(scripts["check"])),
            "reserve + settle": cpu_per_request(
                lambda: reserves_and_settles(scripts["reserve"], scripts["reserve"], 7)),
            "bare check": cpu_per_request(lambda: checks(scripts["bare check"])),
            "bare reserve + settle": cpu_per_request(
                lambda: reserves_and_settles(scripts["bare reserve"], scripts["bare settle"], 6)),
            "acquire + release": cpu_per_request(floodgate_acquires_and_releases),
            "bare acquire + release": cpu_per_request(bare_acquires_and_releases),
        }
    finally:
        conn.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)  # rounds spread by tens of % here
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--lua", default=os.path.join(HERE, "..", "lua"),
                        help="floodgate's Lua scripts (for the script floor)")
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
        floors = []
        for _ in range(args.rounds):
            redis.cli("FLUSHALL")
            floors.append(script_costs(redis, args.lua, args.keys, args.seconds))
            print("  scripts, Redis CPU per request: " + "  ".join(
                f"{name} {us:.1f} us" for name, us in floors[-1].items()), file=sys.stderr)
    finally:
        redis.stop()

    md = [f"### Reservations and leases ({time.strftime('%Y-%m-%d')}, Redis {version}, "
          f"{os.cpu_count()} cores shared by the client and redis-server)\n",
          f"`floodgate bench --keys {args.keys} --threads 1`: a Check (`gcra:1000000/1s`), a "
          "Reserve of 1 settled at 0 once admitted (same policy; the request ends with its "
          "settle), a Check of `sliding_log:100000/1s` (the rule a lease follows), an Acquire "
          "released once admitted (`concurrency:100,lease=30s`), and the same on one key "
          "(`concurrency:100000,lease=30s`, every lease in flight on it), back to back in "
          f"each round; medians of {args.rounds} rounds of {args.seconds:g} s. memory:// "
          "decides inline (1 in flight); redis:// batches (batch=64, 1,024 in flight, denial "
          "cache off). Every request was admitted and answered by the store. Ratio = the "
          "first requests/s over the second, within each round. Target: <= 2.2 for the "
          "costs against a check; the last row sets many keys holding a lease each against "
          "one key holding every lease.\n",
          "| store | ratio | first /s | second /s | ratio, each round | ratio |",
          "|---|---|---:|---:|---:|---:|"]
    labels = {"reserve + settle / check": "gcra check / reserve + settle",
              "acquire + release / check (sliding_log)":
                  "sliding_log check / acquire + release",
              "acquire + release / check (gcra)": "gcra check / acquire + release",
              "acquire + release, 100,000 keys / one key":
                  "acquire + release: 100,000 keys / one key"}
    csv_rows = []
    for r in rows:
        for name, (base, measured) in RATIOS.items():
            each = r["ratios"][name]
            md.append(f"| {r['store']} | {labels[name]} | "
                      f"{r[base]['decisions_per_sec']:,.0f} | "
                      f"{r[measured]['decisions_per_sec']:,.0f} | "
                      + ", ".join(f"{x:.2f}" for x in each)
                      + f" | **{statistics.median(each):.2f}** |")
            csv_rows.append([r["store"], r["concurrency"], name,
                             f"{r[base]['decisions_per_sec']:.0f}",
                             f"{r[measured]['decisions_per_sec']:.0f}",
                             f"{r[measured]['p99_us']:.1f}", f"{statistics.median(each):.4f}",
                             " ".join(f"{x:.4f}" for x in each)])
    def each_round(measured, base):
        return [f[measured] / f[base] for f in floors]

    script_ratio = {
        "floodgate reserve": each_round("reserve + settle", "check"),
        "bare reserve": each_round("bare reserve + settle", "bare check"),
        "floodgate acquire": each_round("acquire + release", "check"),
        "bare acquire": each_round("bare acquire + release", "bare check")}
    med = lambda name: statistics.median(f[name] for f in floors)
    ratio = lambda name: (", ".join(f"{x:.2f}" for x in script_ratio[name])
                          + f" | **{statistics.median(script_ratio[name]):.2f}**")
    md += ["",
           "What Redis itself spends (its CPU, INFO cpu, per request) when one Python driver "
           "sends the scripts alike: 64 operations per call, 8 calls per pipeline, the same "
           f"policies and {args.keys:,} keys; floodgate's lua/batch.lua and "
           "lua/reservation.lua beside the least Lua that does the same work "
           "(bench/bare_*.lua). The bare reserve + settle keeps a record per reservation, "
           "written by the reserve, read and deleted by the settle: its ratio is the floor "
           "of keeping such a record on this Redis. Leases keep no record, in floodgate "
           "as in the bare scripts: the issue's sorted set alone, its release handed the "
           "key and the member (a lease's id carries them); the bare ratio is the floor of "
           "any acquire + release on that sorted set, against the gcra check. "
           f"Medians of {args.rounds} rounds.\n",
           "| scripts | check | reserve + settle | ratio, each round | ratio "
           "| acquire + release | ratio, each round | ratio |",
           "|---|---:|---:|---:|---:|---:|---:|---:|",
           f"| floodgate | {med('check'):.1f} µs | {med('reserve + settle'):.1f} µs | "
           f"{ratio('floodgate reserve')} | {med('acquire + release'):.1f} µs | "
           f"{ratio('floodgate acquire')} |",
           f"| bare floor | {med('bare check'):.1f} µs | {med('bare reserve + settle'):.1f} µs | "
           f"{ratio('bare reserve')} | {med('bare acquire + release'):.1f} µs | "
           f"{ratio('bare acquire')} |"]
    floor_rows = [[i + 1] + [f"{f[name]:.3f}" for name in f] for i, f in enumerate(floors)]
    part_output.save(args.out, "reservations.md", md, {
        "reservations.csv": (
            ["store", "in_flight", "ratio", "base_per_sec", "measured_per_sec",
             "measured_p99_us", "ratio_median", "ratio_each_round"], csv_rows),
        "reservations_scripts.csv": (
            ["round", "check_us", "reserve_settle_us", "bare_check_us",
             "bare_reserve_settle_us", "acquire_release_us", "bare_acquire_release_us"],
            floor_rows)})


if __name__ == "__main__":
    main()
