#!/usr/bin/env python3
"""make bench, authz-hold part: memory per /v1/authz answer held for its delay (docs/http.md,
"Waiting"; issue 38).

Starts `floodgate serve` on memory:// with one rule under delay=1h, opens N connections (10,000
by default, the default max_waiting) that each send one /v1/authz request (each its own key:
the first request of a key is answered at once, so every connection sends two, the second
held), waits until the /metrics gauge floodgate_authz_waiting reads N, and reports the
server's RSS growth per held request. Then it closes every client and checks that the gauge
returns to 0 (each place freed). A fresh server per run; medians of the runs.

The client is this script, not wrk: wrk sends the next request on every answer and measures
throughput, while this needs N requests held at once and the server's RSS with them. The
open-file limit is raised to hold N connections on each side (the server inherits it).
  python3 bench/authz_hold_bench.py --floodgate build/floodgate --out DIR [--held N] [--runs R]
"""
import argparse
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part

CONFIG = """listen: 127.0.0.1:{port}
max_waiting: {max_waiting}
rules:
  - name: held
    match: {{path_prefix: /held}}
    identify: header:X-Key
    policy: {policy}
"""
HOLD_POLICY = "gcra:1/1h,burst=1,delay=1h"  # the second request of a key: held for an hour
RELEASE_DELAY_S = 2
# The second request of a key proceeds 2 s after the first was decided (burst 1: no tolerance).
RELEASE_POLICY = f"gcra:1/{RELEASE_DELAY_S}s,burst=1,delay={RELEASE_DELAY_S}s"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def request(key):
    return (f"GET /v1/authz HTTP/1.1\r\nHost: x\r\nX-Original-URI: /held\r\nX-Key: {key}\r\n\r\n"
            .encode())


def gauge(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("floodgate_authz_waiting "):
            return int(line.split()[1])
    return -1


def wait_gauge(port, n, guard=60):
    until = time.monotonic() + guard
    while time.monotonic() < until:
        if gauge(port) == n:
            return True
        time.sleep(0.05)
    return False


class Server:
    """`floodgate serve` on memory:// with the one rule under `policy`, answering /metrics."""

    def __init__(self, binary, n, policy):
        self.port = free_port()
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(CONFIG.format(port=self.port, max_waiting=n, policy=policy))
            self.config = f.name
        self.proc = subprocess.Popen([binary, "serve", "--config", self.config],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until = time.monotonic() + 30
        while time.monotonic() < until:
            try:
                gauge(self.port)
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SystemExit("authz_hold_bench: floodgate serve did not answer within 30 s")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        os.unlink(self.config)


def release_lateness(binary, n):
    """`n` keys, each asked twice on its own connection under RELEASE_POLICY: the first answer
    at once, the second (sent as soon as the first arrives) held until the first's decision +
    RELEASE_DELAY_S. The lateness lies between second arrival - first arrival - RELEASE_DELAY_S
    (the first answer's way back is missing) and second arrival - first request's send -
    RELEASE_DELAY_S (its way to its decision is in it). The first requests go out in chunks,
    answers read between chunks, so that neither side queues them. Both sorted, in ms."""
    server = Server(binary, n, RELEASE_POLICY)
    selector = selectors.DefaultSelector()
    sent, answered, lateness, low, buffers = {}, {}, [], [], {}
    sockets = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", server.port))
            sockets.append(s)
            buffers[i] = b""
            selector.register(s, selectors.EVENT_READ, i)

        def read(timeout):
            for key, _ in selector.select(timeout=timeout):
                i, s = key.data, key.fileobj
                data = s.recv(4096)
                if not data:
                    raise SystemExit("authz_hold_bench: the server closed a held connection")
                arrived = time.monotonic()
                buffers[i] += data
                if b"\r\n\r\n" not in buffers[i]:
                    continue
                if not buffers[i].startswith(b"HTTP/1.1 204"):
                    raise SystemExit(f"authz_hold_bench: answered {buffers[i][:40]!r}, not 204")
                buffers[i] = b""
                if i not in answered:
                    answered[i] = arrived
                    s.sendall(request(f"r{i}"))  # a few bytes: the socket's buffer takes them
                else:
                    lateness.append((arrived - sent[i] - RELEASE_DELAY_S) * 1000)
                    low.append((arrived - answered[i] - RELEASE_DELAY_S) * 1000)
                    selector.unregister(s)

        for chunk in range(0, n, 100):
            for i in range(chunk, min(n, chunk + 100)):
                sent[i] = time.monotonic()
                sockets[i].sendall(request(f"r{i}"))
            read(0)
        until = time.monotonic() + RELEASE_DELAY_S + 120  # a guard; every answer comes sooner
        while len(lateness) < n and time.monotonic() < until:
            read(1)
        if len(lateness) < n:
            raise SystemExit(f"authz_hold_bench: {n - len(lateness)} held answers never came")
    finally:
        selector.close()
        for s in sockets:
            s.close()
        server.stop()
    return sorted(low), sorted(lateness)


def run_once(binary, n):
    """One fresh server holding `n` answers: its RSS idle, with the connections open, with
    each holding an answer; and whether every place was taken, then freed."""
    server = Server(binary, n, HOLD_POLICY)
    port = server.port
    clients = []
    try:
        base = rss_kib(server.proc.pid)
        # Warm-up: connections and their buffers exist before the baseline, so the growth
        # is what holding costs beyond an open, idle keep-alive connection.
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(request(f"k{i}"))
            clients.append(s)
        for s in clients:
            if not s.recv(4096).startswith(b"HTTP/1.1 204"):
                raise SystemExit("authz_hold_bench: a first request was not answered 204")
        time.sleep(0.5)  # the server settles its buffers (a bench may wait; a test may not)
        before = rss_kib(server.proc.pid)
        for i, s in enumerate(clients):
            s.sendall(request(f"k{i}"))
        held = wait_gauge(port, n)
        after = rss_kib(server.proc.pid)
        for s in clients:
            s.close()
        clients = []
        freed = wait_gauge(port, 0)
    finally:
        for s in clients:
            s.close()
        server.stop()
    return {"idle_kib": base, "open_kib": before, "held_kib": after,
            "bytes_per_held": (after - before) * 1024 / n,
            "bytes_per_held_with_connection": (after - base) * 1024 / n,
            "all_held": held, "all_freed": freed}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--held", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    n = args.held
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n + 256:
        raise SystemExit(f"authz_hold_bench: the open-file limit's hard bound is {hard}: "
                         f"{n} connections need {n + 256}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n + 256), hard))
    runs = []
    for i in range(args.runs):
        r = run_once(args.floodgate, n)
        runs.append(r)
        print(f"  run {i}: held {n}: {r['all_held']}; RSS {r['idle_kib']} KiB idle, "
              f"{r['open_kib']} KiB with {n} open connections, {r['held_kib']} KiB with each "
              f"holding an answer: {r['bytes_per_held']:.0f} bytes per held request beyond "
              f"its connection, {r['bytes_per_held_with_connection']:.0f} with it; all places "
              f"freed: {r['all_freed']}", file=sys.stderr)
        if not r["all_held"] or not r["all_freed"]:
            raise SystemExit("authz_hold_bench: the server did not hold, or did not free, "
                             f"{n} answers")
        for bound, late in zip(("low", "high"), release_lateness(args.floodgate, n)):
            r.update({f"late_{bound}_p50_ms": late[len(late) // 2],
                      f"late_{bound}_p99_ms": late[int(len(late) * 0.99)],
                      f"late_{bound}_max_ms": late[-1]})
        print(f"  run {i}: {n} held for {RELEASE_DELAY_S} s, released late by p50 "
              f"{r['late_low_p50_ms']:.1f} to {r['late_high_p50_ms']:.1f} ms, p99 "
              f"{r['late_low_p99_ms']:.1f} to {r['late_high_p99_ms']:.1f} ms, max "
              f"{r['late_low_max_ms']:.1f} to {r['late_high_max_ms']:.1f} ms", file=sys.stderr)
    keys = ["idle_kib", "open_kib", "held_kib", "bytes_per_held", "bytes_per_held_with_connection"]
    keys += [f"late_{bound}_{q}_ms" for bound in ("low", "high") for q in ("p50", "p99", "max")]
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    load_avg = os.getloadavg()
    md = [f"### /v1/authz answers held for their delay ({time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores shared with other work on the machine; load average "
          f"{load_avg[0]:.2f} at the end)\n",
          f"`floodgate serve` on memory://, one rule `{HOLD_POLICY}`, "
          f"`max_waiting: {n}`; {n:,} keep-alive connections (a Python client: wrk would "
          "resend on each answer), each with its own key: a first request answered 204 at "
          "once, then a second held (the `floodgate_authz_waiting` gauge reads "
          f"{n:,}). RSS from /proc; a fresh server per run; medians of {len(runs)} runs. "
          "Every run held all of them and, once the clients closed, freed every place.\n",
          "| RSS idle | with the connections open | with every answer held | per held answer, "
          "beyond its connection | per held answer, with its connection |",
          "|---:|---:|---:|---:|---:|",
          f"| {med['idle_kib'] / 1024:.1f} MiB | {med['open_kib'] / 1024:.1f} MiB | "
          f"{med['held_kib'] / 1024:.1f} MiB | **{med['bytes_per_held']:,.0f} bytes** | "
          f"{med['bytes_per_held_with_connection'] / 1024:,.1f} KiB |",
          "",
          f"Released on time: a fresh server under `{RELEASE_POLICY}`, {n:,} connections each "
          "asking for its own key twice, the second request sent as soon as the first answer "
          f"arrives and held until {RELEASE_DELAY_S} s after the first was decided. At the "
          "client, the lateness lies between the second answer's arrival - the first's arrival "
          f"- {RELEASE_DELAY_S} s (the first answer's way back missing) and its arrival - the "
          f"first request's send - {RELEASE_DELAY_S} s (the first's way to its decision in "
          f"it); the client's reading of {n:,} answers is in both.\n",
          "| released late by | p50 | p99 | max |", "|---|---:|---:|---:|",
          *[f"| {label} | {med[f'late_{bound}_p50_ms']:.1f} ms | "
            f"{med[f'late_{bound}_p99_ms']:.1f} ms | {med[f'late_{bound}_max_ms']:.1f} ms |"
            for bound, label in (("low", "at least (from the first arrival)"),
                                 ("high", "at most (from the first send)"))]]
    rows = [[str(i), str(n)] + [f"{r[k]:.1f}" for k in keys] for i, r in enumerate(runs)]
    part_output.save(args.out, "authz_hold.md", md,
                     {"authz_hold.csv": (["run", "held"] + keys, rows)})


if __name__ == "__main__":
    main()
