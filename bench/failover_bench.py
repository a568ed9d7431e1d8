#!/usr/bin/env python3
"""make bench, failover part: what a failover costs in decisions (issue 37).

Per store (Sentinel, Redis Cluster), fault and wait_replicas (0 or 1), one run on a fresh
set of real redis-servers on loopback: `floodgate serve` in front, 4 keep-alive HTTP
clients deciding on one key (fixed_window, never full) as fast as they can, the fault, and
the load kept on until Redis has answered again for a second. Then:

- lost: the decisions Redis acknowledged (allowed, not degraded) minus what the primary
  holds afterwards (a cost-0 check): each is an over-admission, the new primary hands
  those units out again;
- degraded: answers given by on_error (fail_closed here) instead of Redis;
- first answer on the new primary: from the fault to the first script call the promoted
  node ran (its INFO commandstats, polled every 10 ms over a socket of our own: a replica
  runs none, scripts replicate as their effects);
- longest gap: the longest time, from the fault on, without an acknowledged answer.

The faults: a planned failover (`SENTINEL FAILOVER`; `CLUSTER FAILOVER` on the victim's
replica, and `CLUSTER FAILOVER FORCE`), `kill -9` of the primary, and SIGSTOP of it for
5 s (past the 1 s down-after / cluster-node-timeout), then SIGCONT. Each setup runs
wait_replicas + 1 replicas per primary (docs/stores.md: one is promoted, N stay to
acknowledge). Bounded: every wait has a deadline, the whole part takes a few minutes.

Runnable alone: bench/failover_bench.py --floodgate build/floodgate --out DIR
(--only sentinel|cluster, --wait 0|1 to run a subset).
"""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part
from cluster_bench import cluster_port  # a free port whose cluster bus port is free too
from redis_bench import Redis, free_port  # a redis-server on a free loopback port

POLICY = "fixed_window:1000000000/1d"  # never full: every decision Redis answers is counted
KEY = "hot"
CLIENTS = 4
DOWN_AFTER_MS = 1000  # Sentinel's down-after and the cluster's node timeout
STOP_SECONDS = 5
STORE_OPTIONS = "timeout=250ms&on_error=fail_closed&denial_cache=0us"
RUN_LIMIT = 30  # seconds a run may wait for Redis to answer again


class Resp:
    """A RESP connection of our own to one server, for polling INFO cheaply."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise OSError("closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                data = self.sock.recv(65536)
                if not data:
                    raise OSError("closed")
                self.buf += data
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value.decode()
        if kind == b"*":
            return [self._read() for _ in range(int(rest))]
        if kind == b":":
            return int(rest)
        return rest.decode()

    def call(self, *args):
        out = f"*{len(args)}\r\n" + "".join(f"${len(str(a))}\r\n{a}\r\n" for a in args)
        self.sock.sendall(out.encode())
        return self._read()

    def close(self):
        self.sock.close()


def script_calls(info):
    """Script calls a server ran, from its INFO commandstats."""
    total = 0
    for line in info.splitlines():
        name = line.split(":", 1)[0]
        if name in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro"):
            for field in line.split(":", 1)[1].split(","):
                if field.startswith("calls="):
                    total += int(field[6:])
    return total


def info_field(text, name):
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


class Load:
    """CLIENTS keep-alive connections deciding on KEY, each answer recorded as
    (time, allowed, degraded); an HTTP or connection error counts as degraded."""

    def __init__(self, port):
        self.port = port
        self.answers = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.body = json.dumps({"key": KEY, "policy": POLICY})
        self.threads = [threading.Thread(target=self.run) for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        deadline = time.monotonic() + 4 * RUN_LIMIT
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                conn.request("POST", "/v1/check", body=self.body,
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                d = json.loads(data) if response.status == 200 else {}
                answer = (time.monotonic(), bool(d.get("allowed")),
                          response.status != 200 or bool(d.get("degraded")))
            except (OSError, http.client.HTTPException, ValueError):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                answer = (time.monotonic(), False, True)
            with self.lock:
                self.answers.append(answer)
        conn.close()

    def acknowledged_since(self, t):
        with self.lock:
            return [a for a in self.answers if a[0] > t and not a[2]]

    def wait_acknowledged(self, after, count, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if len(self.acknowledged_since(after)) >= count:
                return True
            time.sleep(0.01)
        return False

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return self.answers


def peek(port):
    """What the primary holds for KEY (limit - remaining of a cost-0 check), once Redis
    answers it (not degraded)."""
    body = json.dumps({"key": KEY, "policy": POLICY, "cost": 0})
    deadline = time.monotonic() + RUN_LIMIT
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/v1/check", body=body, headers={"Content-Type": "application/json"})
            d = json.loads(conn.getresponse().read())
            if not d.get("degraded"):
                return d["limit"] - d["remaining"]
        except (OSError, http.client.HTTPException, ValueError, KeyError):
            pass
        finally:
            conn.close()
        time.sleep(0.05)
    return None  # Redis never answered the count after the fault


class Watch(threading.Thread):
    """Polls the script calls of `servers` (the candidates for promotion) every 10 ms, and
    records when each first ran one after `start()`."""

    def __init__(self, servers):
        super().__init__()
        self.conns = {s.port: Resp(s.port) for s in servers}
        self.base = {p: script_calls(c.call("INFO", "commandstats")) for p, c in self.conns.items()}
        self.first = {}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for port, conn in list(self.conns.items()):
                if port in self.first:
                    continue
                try:
                    if conn is None:
                        conn = self.conns[port] = Resp(port)
                    if script_calls(conn.call("INFO", "commandstats")) > self.base[port]:
                        self.first[port] = time.monotonic()
                except OSError:
                    # A sentinel promoting a replica drops its clients (CLIENT KILL TYPE
                    # normal), ours too: asked again on a new connection.
                    if conn is not None:
                        conn.close()
                    self.conns[port] = None
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        self.join()
        for c in self.conns.values():
            if c is not None:
                c.close()
        return min(self.first.values()) if self.first else None


def start_floodgate(binary, store, procs, log):
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--store", store,
                             "--threads", "1"], stdout=log, stderr=log)
    procs.append(proc)
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"floodgate serve --store {store} exited")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return port
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"floodgate serve --store {store} never became ready")


def wait(what, predicate, limit=RUN_LIMIT):
    deadline = time.time() + limit
    while not predicate():
        if time.time() > deadline:
            raise SystemExit(f"failover bench: {what}")
        time.sleep(0.05)


SYNC = ["--repl-diskless-sync-delay", "0"]


def sentinel_setup(servers, replicas):
    """A primary, `replicas` replicas and three sentinels (quorum 2) watching them as fg."""
    primary = Redis(extra_args=SYNC)
    servers.append(primary)
    data = [primary]
    for _ in range(replicas):
        data.append(Redis(extra_args=SYNC + ["--replicaof", "127.0.0.1", str(primary.port)]))
        servers.append(data[-1])
    wait("replicas online", lambda: info_field(primary.cli("INFO", "replication"),
                                               "connected_slaves") == str(replicas))
    config = (f"sentinel monitor fg 127.0.0.1 {primary.port} 2\n"
              f"sentinel down-after-milliseconds fg {DOWN_AFTER_MS}\n"
              "sentinel failover-timeout fg 2000\nsentinel parallel-syncs fg 1\n")
    sentinels = []
    for _ in range(3):
        sentinels.append(Redis(sentinel_config=config))
        servers.append(sentinels[-1])

    def known():
        for s in sentinels:
            master = s.cli("SENTINEL", "MASTER", "fg").split("\n")
            fields = dict(zip(master[::2], master[1::2]))
            if fields.get("num-other-sentinels") != "2" or fields.get("num-slaves") != str(replicas):
                return False
        return True
    wait("the sentinels know each other and the replicas", known)
    url = ",".join(f"127.0.0.1:{s.port}" for s in sentinels)
    return f"redis-sentinel://{url}/fg", primary, data[1:], sentinels


def cluster_setup(servers, replicas):
    """3 primaries with `replicas` replicas each, node timeout DOWN_AFTER_MS."""
    nodes = []
    for _ in range(3 * (replicas + 1)):
        nodes.append(Redis(port=cluster_port(), extra_args=SYNC + [
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(DOWN_AFTER_MS),
            "--cluster-replica-validity-factor", "0",
            "--cluster-require-full-coverage", "no"]))
        servers.append(nodes[-1])
    out = subprocess.run(["redis-cli", "--cluster", "create",
                          *[f"127.0.0.1:{n.port}" for n in nodes],
                          "--cluster-replicas", str(replicas), "--cluster-yes"],
                         capture_output=True, text=True).stdout
    if "All 16384 slots covered" not in out:
        raise SystemExit(f"redis-cli --cluster create failed:\n{out}")

    # A CLUSTER FAILOVER asked before every node knows the replica as its primary's, or
    # while the nodes still gossip their epochs, times out: a primary refuses its vote to
    # a replica behind its epoch, and Redis retries only after twice the node timeout
    # (tests/redis_failover_test.cc, ReadyForFailover, waits for the same).
    def healthy():
        epochs = set()
        for n in nodes:
            info = n.cli("CLUSTER", "INFO")
            if "cluster_state:ok" not in info:
                return False
            epochs.add(info_field(info, "cluster_current_epoch"))
            known_replicas = [line for line in n.cli("CLUSTER", "NODES").splitlines()
                              if "slave " in line]
            if len(known_replicas) != 3 * replicas:
                return False
            role = n.cli("INFO", "replication")
            if info_field(role, "role") == "master" and \
                    info_field(role, "connected_slaves") != str(replicas):
                return False
            if info_field(role, "role") == "slave" and \
                    info_field(role, "master_link_status") != "up":
                return False
        return len(epochs) == 1
    wait("the cluster is healthy", healthy)
    return "redis-cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes[:3]), nodes


def replicas_of(nodes, primary):
    """The nodes replicating `primary` now."""
    return [n for n in nodes if n is not primary and
            info_field(n.cli("INFO", "replication"), "master_port") == str(primary.port)]


def fault(kind, victim, replicas, sentinels):
    """Starts the fault; returns a function ending it (SIGCONT), or None."""
    if kind == "planned":
        if sentinels:
            sentinels[0].cli("SENTINEL", "FAILOVER", "fg")
        else:
            replicas[0].cli("CLUSTER", "FAILOVER")
    elif kind == "planned FORCE":
        replicas[0].cli("CLUSTER", "FAILOVER", "FORCE")
    elif kind == "kill -9":
        victim.proc.kill()
    elif kind == "SIGSTOP":
        victim.proc.send_signal(signal.SIGSTOP)
        return lambda: victim.proc.send_signal(signal.SIGCONT)
    return None


def one_run(args, store_kind, kind, wait_replicas):
    servers, procs = [], []
    # floodgate serve's log, outside the results (bench/results is kept in the repository).
    log = open(os.path.join(tempfile.gettempdir(), "floodgate-failover-serve.log"), "a")
    try:
        replicas = wait_replicas + 1
        if store_kind == "sentinel":
            url, victim, candidates, sentinels = sentinel_setup(servers, replicas)
        else:
            url, nodes = cluster_setup(servers, replicas)
            sentinels = []
        options = STORE_OPTIONS + (f"&wait_replicas={wait_replicas}" if wait_replicas else "")
        port = start_floodgate(args.floodgate, f"{url}?{options}", procs, log)
        load = Load(port)
        if not load.wait_acknowledged(0, 2000, RUN_LIMIT):
            raise SystemExit(f"failover bench: {store_kind} answered no load")
        if store_kind == "cluster":
            # The victim: the primary holding the one key.
            victim = next(n for n in nodes if info_field(n.cli("INFO", "replication"), "role")
                          == "master" and n.cli("DBSIZE").strip() == "1")
            candidates = replicas_of(nodes, victim)
        watch = Watch(candidates)
        watch.start()
        at = time.monotonic()
        end = fault(kind, victim, candidates, sentinels)
        if end is not None:
            time.sleep(STOP_SECONDS)
            end()
        # Until the promoted node has run a decision, then an acknowledged answer after
        # it and a second more of load.
        deadline = time.monotonic() + RUN_LIMIT
        while not watch.first and time.monotonic() < deadline:
            time.sleep(0.02)
        first = watch.finish()
        if first is not None:
            load.wait_acknowledged(first, 1, RUN_LIMIT)
            time.sleep(1)
        answers = load.finish()
        held = peek(port)
        acknowledged = sum(1 for a in answers if a[1] and not a[2])
        degraded = sum(1 for a in answers if a[2])
        gap, last = 0.0, at
        for t, _, bad in answers:
            if t > at and not bad:
                gap, last = max(gap, t - last), t
        if first is None:
            gap = max(gap, time.monotonic() - last)
        row = dict(store=store_kind, fault=kind, wait_replicas=wait_replicas,
                   replicas=replicas, answers=len(answers), acknowledged=acknowledged,
                   # A degraded answer whose call ran late is counted by Redis too: held
                   # may exceed what was acknowledged, and that is no loss.
                   held=held, lost=None if held is None else max(0, acknowledged - held),
                   degraded=degraded,
                   first_ms=None if first is None else round((first - at) * 1000),
                   gap_ms=round(gap * 1000))
        print(json.dumps(row), file=sys.stderr, flush=True)
        return row
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for s in servers:
            try:
                s.proc.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            s.stop()
        log.close()


FAULTS = {
    "sentinel": ["planned", "kill -9", "SIGSTOP"],
    "cluster": ["planned", "planned FORCE", "kill -9", "SIGSTOP"],
}
TITLE = {
    ("sentinel", "planned"): "`SENTINEL FAILOVER`",
    ("cluster", "planned"): "`CLUSTER FAILOVER`",
    ("cluster", "planned FORCE"): "`CLUSTER FAILOVER FORCE`",
    ("sentinel", "kill -9"): "`kill -9` of the primary",
    ("cluster", "kill -9"): "`kill -9` of a primary",
    ("sentinel", "SIGSTOP"): f"SIGSTOP {STOP_SECONDS} s, then SIGCONT",
    ("cluster", "SIGSTOP"): f"SIGSTOP {STOP_SECONDS} s, then SIGCONT",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", default="build/floodgate")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--only", choices=["sentinel", "cluster"])
    parser.add_argument("--wait", type=int, choices=[0, 1])
    parser.add_argument("--rows", help="only write the tables, from the JSON lines a run printed")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    if args.rows:
        with open(args.rows) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
        for r in rows:
            r["lost"] = None if r["held"] is None else max(0, r["acknowledged"] - r["held"])
    else:
        for store_kind in (["sentinel", "cluster"] if not args.only else [args.only]):
            for wait_replicas in ([0, 1] if args.wait is None else [args.wait]):
                for kind in FAULTS[store_kind]:
                    rows.append(one_run(args, store_kind, kind, wait_replicas))
    write_tables(args, rows)


def write_tables(args, rows):
    def shown(value, unit=""):
        return "never" if value is None else f"{value:,}{unit}"
    md = ["### Failover: decisions lost, degraded, time to recover",
          "",
          f"One key under {CLIENTS} keep-alive HTTP clients through `floodgate serve` "
          f"(`{STORE_OPTIONS}`), down-after / cluster-node-timeout {DOWN_AFTER_MS} ms, "
          "wait_replicas + 1 replicas per primary. **lost**: acknowledged decisions the "
          "primary does not hold afterwards; **first answer**: from the fault to the first "
          "script call on the promoted node; **longest gap**: the longest time without an "
          "acknowledged answer from the fault on (bench/failover_bench.py).",
          "",
          "| store | fault | wait_replicas | answers | lost | degraded | first answer on the "
          "new primary | longest gap |",
          "|---|---|---|---|---|---|---|---|"]
    csv_rows = []
    for r in rows:
        md.append(f"| {r['store']} | {TITLE[(r['store'], r['fault'])]} | {r['wait_replicas']} | "
                  f"{r['answers']:,} | **{shown(r['lost'])}** | {r['degraded']:,} | "
                  f"{shown(r['first_ms'], ' ms')} | {r['gap_ms']:,} ms |")
        csv_rows.append([r["store"], r["fault"], r["wait_replicas"], r["replicas"], r["answers"],
                         r["acknowledged"], "" if r["held"] is None else r["held"],
                         "" if r["lost"] is None else r["lost"], r["degraded"],
                         "" if r["first_ms"] is None else r["first_ms"], r["gap_ms"]])
    part_output.save(args.out, "failover.md", md, {"failover.csv": (
        ["store", "fault", "wait_replicas", "replicas", "answers", "acknowledged", "held",
         "lost", "degraded", "first_answer_ms", "longest_gap_ms"], csv_rows)})


if __name__ == "__main__":
    main()
