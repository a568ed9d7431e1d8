#!/usr/bin/env python3
"""make bench, Redis Cluster part: 3 primaries next to one standalone redis-server.

The same `floodgate bench` run on a 3-primary Redis Cluster and on one standalone redis-server, in
the same process tree, with the ratio.

Each round runs standalone and cluster back to back (alternating which goes first),
batching off (batch=1) and on (batch=64), gcra over 100,000 keys. Besides decisions/s,
it reads the CPU time every redis-server and the client used (from /proc), so the cost
of a decision on a node and in the client can be written down per decision: that is
what tells how throughput scales with primaries on machines with cores to spare
(docs/scaling.md). Everything runs on free loopback ports and is stopped at the end.
The cluster has no replicas here: on 2 cores their replication traffic would only
take CPU from the primaries being measured.

A fourth row, "3 standalone", is the floor any cluster client meets on this machine: three
standalone servers, each with its own client process sending a third of the concurrency
over a third of the keys, all at once. No routing, no redirects, every call batched as on
one server: what splitting the load over three servers costs by itself.
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
from redis_bench import Redis  # a redis-server on a free loopback port

TICKS = os.sysconf("SC_CLK_TCK")
STORES = ["standalone", "cluster", "cluster of 1", "3 standalone"]


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def cluster_port():
    # The cluster bus listens on port + 10000: both must be free.
    for _ in range(200):
        port = random.randint(20000, 29999)
        if port_free(port) and port_free(port + 10000):
            return port
    raise SystemExit("no free port pair for a cluster node")


def start_cluster(servers, primaries=3):
    """A cluster of `primaries` primaries (no replicas) on free loopback port pairs, every
    node appended to `servers` as it starts (the caller stops them, also on failure).
    Returns the nodes; wait_healthy() before use."""
    nodes = []
    for _ in range(primaries):
        nodes.append(Redis(port=cluster_port(),
                           extra_args=["--cluster-enabled", "yes", "--cluster-config-file",
                                       "nodes.conf", "--cluster-node-timeout", "2000"]))
        servers.append(nodes[-1])
    out = subprocess.run(["redis-cli", "--cluster", "create",
                          *[f"127.0.0.1:{n.port}" for n in nodes], "--cluster-yes"],
                         capture_output=True, text=True).stdout
    if "All 16384 slots covered" not in out:
        raise SystemExit(f"redis-cli --cluster create failed:\n{out}")
    return nodes


def wait_healthy(nodes):
    deadline = time.time() + 20
    while not all("cluster_state:ok" in n.cli("CLUSTER", "INFO") for n in nodes):
        if time.time() > deadline:
            raise SystemExit("the cluster did not become healthy")
        time.sleep(0.1)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def bench(binary, urls, duration, pids, concurrency=128, keys=100000):
    """`floodgate bench` on each of `urls` at once, `concurrency` and `keys` split evenly
    among them; decisions and CPU summed over all."""
    before = {pid: cpu_seconds(pid) for pid in pids}
    start = os.times()
    procs = [subprocess.Popen([binary, "bench", "--store", url, "--policy", "gcra:1000/1s",
                               "--keys", str(keys // len(urls)), "--threads", "1",
                               "--concurrency", str(concurrency // len(urls)), "--duration",
                               duration, "--json"], stdout=subprocess.PIPE, text=True)
             for url in urls]
    outs = [p.communicate()[0] for p in procs]
    end = os.times()
    if any(p.returncode for p in procs):
        raise SystemExit(f"floodgate bench failed: {outs}")
    runs = [json.loads(out) for out in outs]
    if any(r["errors"] or r["degraded"] for r in runs):
        raise SystemExit(f"floodgate bench reported errors: {outs}")
    result = {"decisions": sum(r["decisions"] for r in runs),
              "decisions_per_sec": sum(r["decisions_per_sec"] for r in runs),
              "store_calls": sum(r["store_calls"] for r in runs),
              # Each client's own percentiles: the slowest one's.
              "p50_us": max(r["p50_us"] for r in runs), "p99_us": max(r["p99_us"] for r in runs)}
    n = result["decisions"]
    result["server_us"] = sum(cpu_seconds(pid) - before[pid] for pid in pids) / n * 1e6
    result["client_us"] = ((end.children_user - start.children_user) +
                           (end.children_system - start.children_system)) / n * 1e6
    # How well decisions batched: on a cluster, per node where Redis knows script flags
    # (7.0+), else per slot (one decision a call with 100,000 keys over 16,384 slots).
    result["per_call"] = n / result["store_calls"] if result["store_calls"] else 0.0
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="3s")
    args = parser.parse_args()

    servers = []
    try:
        standalone = Redis()
        servers.append(standalone)
        nodes = start_cluster(servers)
        # A cluster of one primary holding every slot: the routing's own cost, without
        # the spreading over primaries.
        single = Redis(port=cluster_port(),
                       extra_args=["--cluster-enabled", "yes", "--cluster-config-file",
                                   "nodes.conf", "--cluster-node-timeout", "2000"])
        servers.append(single)
        single.cli("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        wait_healthy(nodes + [single])
        split = [Redis() for _ in range(3)]
        servers.extend(split)

        urls = {"standalone": [f"redis://127.0.0.1:{standalone.port}"],
                "cluster": ["redis-cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes)],
                "cluster of 1": [f"redis-cluster://127.0.0.1:{single.port}"],
                "3 standalone": [f"redis://127.0.0.1:{s.port}" for s in split]}
        pids = {"standalone": [standalone.proc.pid], "cluster": [n.proc.pid for n in nodes],
                "cluster of 1": [single.proc.pid], "3 standalone": [s.proc.pid for s in split]}
        rows = []
        for batch in (1, 64):
            runs = {store: [] for store in STORES}
            ratios = {store: [] for store in STORES[1:]}
            cpu_ratios = {store: [] for store in STORES[1:]}
            for r in range(args.rounds):
                order = STORES if r % 2 == 0 else STORES[::-1]
                got = {}
                for store in order:
                    got[store] = bench(args.floodgate,
                                       [f"{url}?batch={batch}&denial_cache=0us&timeout=1s"
                                        for url in urls[store]],
                                       args.duration, pids[store])
                    runs[store].append(got[store])
                for store in ratios:
                    ratios[store].append(got[store]["decisions_per_sec"] /
                                         got["standalone"]["decisions_per_sec"])
                    cpu_ratios[store].append(got[store]["server_us"] /
                                             got["standalone"]["server_us"])
            row = {"batch": batch,
                   "ratio": {store: statistics.median(r) for store, r in ratios.items()},
                   "cpu_ratio": {store: statistics.median(r) for store, r in cpu_ratios.items()}}
            for store in runs:
                row[store] = {k: statistics.median(x[k] for x in runs[store])
                              for k in ("decisions_per_sec", "p50_us", "p99_us", "server_us",
                                        "client_us", "per_call")}
            rows.append(row)
            print(f"  batch={batch:<3} standalone {row['standalone']['decisions_per_sec']:>9.0f}/s"
                  f"  cluster {row['cluster']['decisions_per_sec']:>9.0f}/s"
                  f"  ratio {row['ratio']['cluster']:.2f}"
                  f"  redis CPU ratio {row['cpu_ratio']['cluster']:.2f}"
                  f"  decisions/call {row['cluster']['per_call']:.1f}"
                  f"  (3 standalone: redis CPU ratio {row['cpu_ratio']['3 standalone']:.2f})",
                  file=sys.stderr)
    finally:
        for s in servers:
            s.stop()

    md = [f"### Redis Cluster ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores shared by "
          "the client and every redis-server)\n",
          f"`floodgate bench --policy gcra:1000/1s --keys 100000 --threads 1 --concurrency 128 "
          f"-d {args.duration}`, denial cache off, on one redis-server, on a 3-primary "
          "cluster (no replicas), on a cluster of one primary holding every slot (the cost "
          "of routing alone), and on three standalone servers at once, each with its own "
          "client sending a third of the concurrency over a third of the keys (what splitting "
          "the load over three servers costs on this machine, with no cluster at all; p50 and "
          "p99 the slowest client's), back to back in each round; medians of "
          f"{args.rounds} rounds, ratios within a round. CPU per decision from /proc: all "
          "redis-servers together, and the client process. Decisions per call: how well they "
          "batched (a cluster batches per node where Redis knows script flags, 7.0+).\n",
          "| batch | store | decisions/s | p50 | p99 | decisions / call | redis CPU / decision "
          "| client CPU / decision | throughput vs standalone | redis CPU vs standalone |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        for store in STORES:
            r = row[store]
            ratio = row["ratio"].get(store)
            cpu_ratio = row["cpu_ratio"].get(store)
            md.append(f"| {row['batch']} | {store} | {r['decisions_per_sec']:,.0f} | "
                      f"{r['p50_us']:.0f} µs | {r['p99_us']:.0f} µs | {r['per_call']:.1f} | "
                      f"{r['server_us']:.2f} µs | {r['client_us']:.2f} µs | "
                      f"{'**%.2f**' % ratio if ratio is not None else ''} | "
                      f"{'**%.2f**' % cpu_ratio if cpu_ratio is not None else ''} |")
    part_output.save(args.out, "cluster.md", md, {"cluster.csv": (
        ["batch", "store", "decisions_per_sec", "p50_us", "p99_us", "decisions_per_call",
         "redis_cpu_us_per_decision", "client_cpu_us_per_decision", "cluster_over_standalone",
         "redis_cpu_over_standalone"],
        [[row["batch"], store, f"{row[store]['decisions_per_sec']:.0f}",
          f"{row[store]['p50_us']:.1f}", f"{row[store]['p99_us']:.1f}",
          f"{row[store]['per_call']:.2f}",
          f"{row[store]['server_us']:.3f}", f"{row[store]['client_us']:.3f}",
          row["ratio"].get(store, ""), row["cpu_ratio"].get(store, "")]
         for row in rows for store in STORES])})


if __name__ == "__main__":
    main()
