#!/usr/bin/env python3
"""Memory per /v1/authz answer held for its delay (docs/http.md, "Waiting").

Starts `floodgate serve` on memory:// with one rule under delay=1h, opens N connections that
each send one /v1/authz request (each its own key: the first request of a key is answered at
once, so every connection sends two, the second held), waits until the /metrics gauge
floodgate_authz_waiting reads N, and reports the server's RSS growth per held request. Then it
closes every client and checks that the gauge returns to 0 (each place freed).
  python3 bench/authz_hold_bench.py build/floodgate [N]
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

CONFIG = """listen: 127.0.0.1:{port}
max_waiting: {max_waiting}
rules:
  - name: held
    match: {{path_prefix: /held}}
    identify: header:X-Key
    policy: gcra:1/1h,burst=1,delay=1h
"""


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


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * n + 256)), hard))
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(CONFIG.format(port=port, max_waiting=n))
        config = f.name
    server = subprocess.Popen([binary, "serve", "--config", config],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until = time.monotonic() + 30
        while time.monotonic() < until:
            try:
                gauge(port)
                break
            except OSError:
                time.sleep(0.05)
        base = rss_kib(server.pid)
        clients = []
        # Warm-up: connections and their buffers exist before the baseline, so the growth
        # is what holding costs beyond an open, idle keep-alive connection.
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(request(f"k{i}"))
            clients.append(s)
        for s in clients:
            s.recv(4096)  # the first answer: 204 at once
        time.sleep(0.5)
        before = rss_kib(server.pid)
        for i, s in enumerate(clients):
            s.sendall(request(f"k{i}"))
        held = wait_gauge(port, n)
        after = rss_kib(server.pid)
        for s in clients:
            s.close()
        freed = wait_gauge(port, 0)
        print(f"held {n}: {held}; RSS {base} KiB idle, {before} KiB with {n} open connections, "
              f"{after} KiB with each holding an answer: {(after - before) * 1024 / n:.0f} "
              f"bytes per held request beyond its connection, {(after - base) * 1024 / n:.0f} "
              f"with it; all places freed after the clients left: {freed}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.unlink(config)


if __name__ == "__main__":
    main()
