#!/usr/bin/env python3
"""make bench, HTTP part: `floodgate serve` under wrk, next to nginx's limit_req and Express.

Debian's nginx runs limit_req on the same machine, under the same wrk settings.

Every request carries a random client id out of 100,000 (X-Client-Id), so each side
keeps 100,000 limiter keys. nginx runs limit_req on its shared-memory zone and answers
with `empty_gif`, no upstream: the C baseline. (Not `return 200`: `return` answers in the
rewrite phase, before limit_req's preaccess phase runs, and limits nothing.) floodgate
answers /v1/authz (a GET, as nginx's auth_request sends) and /v1/check (a JSON POST), on
memory:// and on Redis. Express with rate-limiter-flexible on the same Redis
(bench/express, what a Node user would deploy, ioredis auto-pipelining on; installed here
with `npm ci`) answers the same /v1/authz requests. nginx workers, floodgate threads and Node
processes are the same number, --server-threads.
Before anything is measured, every server is sent requests over the limit on one client
id, through the very path and limit that are measured, and the bench refuses to run
unless each one first allows and then denies (prove_limits).
Each comparison runs its two sides back to back in each round with the same wrk settings
(every server against nginx, and floodgate on Redis against Express); requests/s and p99
ratios are taken within a round, and the medians of the rounds are reported.
Several limits in one decision (http_multi.md): floodgate on memory:// with a rule of two
limits (MULTI_LIMITS: a burst limit and a per-minute one) against nginx with two
limit_req zones on one location (the same keys, the equivalent rates), each round's
figures shown. Before that comparison each limit on each side is proven to deny on its
own (prove_each_limit): on a fresh client id, the burst limit by requests faster than its
rate, the per-minute one by requests paced under the burst limit's rate until it denies;
floodgate's 429 must name the limit (`denied_by`), nginx's error log the zone
("limiting requests ... by zone").
--only-multi runs that comparison alone.
Everything runs on free loopback ports and is stopped at the end.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import part_output  # bench/part_output.py: the markdown and CSV files of a part

CLIENTS = 100_000
# The limit on every side: nginx rate=1000r/s burst=1000, floodgate gcra:1000/1s,burst=1000,
# rate-limiter-flexible 1000 points per second.
RATE, BURST = 1000, 1000
POLICY = f"gcra:{RATE}/1s,burst={BURST}"
# prove_limits' bounds: it must outrun RATE on one key, from a few connections.
PROOF_REQUESTS, PROOF_SECONDS, PROOF_CONNECTIONS = 5000, 5.0, 8
# Several limits in one decision: the burst limit above and a per-minute one. LONG is
# 33x what a client of the measured load sends in a minute (wrk's ~100,000 requests/s
# over 100,000 ids: ~1 per id per second), so the load is never denied, and low enough
# that the proof reaches it in ~2 s at PROOF_PACE requests/s, a pace at which the burst
# limit never denies (it admits BURST + RATE per second). nginx: a second zone at the
# same rate with the same burst (`rate=2000r/m burst=2000 nodelay`: 2,000 at once, then
# one per 30 ms, where the sliding window admits 2,000 in any minute).
LONG = 2000
MULTI_LIMITS = [("burst", POLICY), ("long", f"sliding_window:{LONG}/1m")]
PROOF_PACE = 1000


def free_ports(n):
    """n distinct free loopback ports: held all at once while the kernel picks them (one at
    a time, the same port can come back twice)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port():
    return free_ports(1)[0]


def wait_port(port, proc, what):
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not listen on {port}")


LUA = {
    "nginx": """
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/", {["X-Client-Id"] = "c" .. math.random(1, %d)})
end
""" % CLIENTS,
    "authz": """
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/authz", {["X-Client-Id"] = "c" .. math.random(1, %d),
                                           ["X-Original-URI"] = "/api/items",
                                           ["X-Original-Method"] = "GET"})
end
""" % CLIENTS,
    "check": """
math.randomseed(os.time())
request = function()
  return wrk.format("POST", "/v1/check", {["Content-Type"] = "application/json"},
                    '{"key":"c' .. math.random(1, %d) .. '","rule":"api"}')
end
""" % CLIENTS,
}


def name_of(store):
    """The server's name in the tables: "floodgate memory", "express+redis"."""
    return store if store.startswith("express") else f"floodgate {store}"


def proof_request(endpoint, key):
    """The request the wrk script of `endpoint` sends, for one client id: (method, path,
    headers, body)."""
    if endpoint == "nginx":
        return "GET", "/", {"X-Client-Id": key}, None
    if endpoint == "authz":
        return "GET", "/v1/authz", {"X-Client-Id": key, "X-Original-URI": "/api/items",
                                    "X-Original-Method": "GET"}, None
    return ("POST", "/v1/check", {"Content-Type": "application/json"},
            json.dumps({"key": key, "rule": "api"}))


def verdict(endpoint, status, body):
    """True allowed, False denied, None for any other answer. /v1/check answers 200 either
    way, with "allowed" in the Decision; the others answer 429 when denied."""
    if endpoint == "check":
        return json.loads(body)["allowed"] if status == 200 else None
    if status == 429:
        return False
    return True if status == (200 if endpoint == "nginx" else 204) else None


def drive(port, endpoint, key, pace=None):
    """Sends requests on client id `key` the way the wrk script of `endpoint` does, from
    PROOF_CONNECTIONS keep-alive connections, until the server denies one (at most
    PROOF_REQUESTS requests and PROOF_SECONDS). With `pace`, request i is not sent before
    i / pace seconds from the start. Returns the counts, the first denial's body, any
    other answer and the time taken."""
    method, path, headers, body = proof_request(endpoint, key)
    state = dict(sent=0, allowed=0, denied=0, other=None, denial=None)
    lock, done = threading.Lock(), threading.Event()
    begin = time.monotonic()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            while not done.is_set() and time.monotonic() - begin < PROOF_SECONDS:
                with lock:
                    if state["sent"] >= PROOF_REQUESTS:
                        return
                    i = state["sent"]
                    state["sent"] += 1
                if pace:
                    time.sleep(max(0.0, begin + i / pace - time.monotonic()))
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                answer = verdict(endpoint, response.status, data)
                with lock:
                    if answer is None:
                        state["other"] = state["other"] or f"HTTP {response.status}"
                        done.set()
                    elif answer:
                        state["allowed"] += 1
                    else:
                        state["denied"] += 1
                        state["denial"] = state["denial"] or data
                        done.set()
        except (OSError, http.client.HTTPException, ValueError) as e:
            with lock:
                state["other"] = state["other"] or f"{type(e).__name__}: {e}"
            done.set()
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(PROOF_CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state["seconds"] = time.monotonic() - begin
    state["path"] = path
    return state


def check_proof(what, state, least, most, limit_text):
    """Exits the bench unless `state` (drive's) allowed at least `least` requests, no more
    than `most`, and then denied. Returns its one-line summary."""
    summary = (f"{state['sent']} requests in {state['seconds']:.2f} s: {state['allowed']} "
               f"allowed, {state['denied']} denied")
    if state["other"]:
        raise SystemExit(f"http_bench: {what}: unexpected answer ({state['other']}) after "
                         f"{summary}; refusing to run")
    if not state["denied"]:
        raise SystemExit(f"http_bench: {what} never denied ({summary}): it does not rate "
                         "limit; refusing to run")
    if state["allowed"] < least:
        raise SystemExit(f"http_bench: {what} denied after only {state['allowed']} allowed "
                         f"requests ({summary}), less than the {least} that {limit_text} "
                         "admits; refusing to run")
    if state["allowed"] > most:
        raise SystemExit(f"http_bench: {what} allowed {state['allowed']} requests ({summary}), "
                         f"more than {most:.0f} that {limit_text} admits; refusing to run")
    return summary


def prove_limits(name, port, endpoint):
    """Sends requests on one client id to the measured path as fast as it can (drive),
    and exits the bench unless the server allowed at least the burst, no more than RATE
    admits on top, and then denied: a baseline that limits nothing, or not at the rule's
    rate, is no baseline."""
    key = f"proof-{name.replace(' ', '-')}-{endpoint}"  # a fresh key: the burst is all there
    state = drive(port, endpoint, key)
    what = f"{name} {state['path']} on one client id"
    # No limiter of RATE/s and BURST admits more than this in the time taken (with some
    # slack).
    most = BURST + 1 + RATE * state["seconds"] * 1.05 + PROOF_CONNECTIONS
    summary = check_proof(what, state, BURST, most, f"{RATE}/s with a burst of {BURST}")
    print(f"  proof: {what}: {summary}", file=sys.stderr)
    return dict(server=name, path=state["path"], allowed=state["allowed"], sent=state["sent"],
                seconds=state["seconds"])


class ErrorLog:
    """nginx's error log, read from where the last look left off: each limit_req denial
    is logged at error level as 'limiting requests, excess: ... by zone "NAME"'."""

    def __init__(self, path):
        self.path, self.offset = path, 0

    def zones_since(self):
        """{zone: denials logged} since the previous call."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode(errors="replace")
            self.offset = f.tell()
        zones = {}
        for zone in re.findall(r'limiting requests, excess: [\d.]+ by zone "([^"]+)"', text):
            zones[zone] = zones.get(zone, 0) + 1
        return zones


def prove_each_limit(name, port, endpoint, nginx_log=None):
    """For each of MULTI_LIMITS, on a fresh client id, makes that limit the one that
    binds and exits the bench unless it denies, at the count it admits, and the denial is
    its own: floodgate's 429 names it in `denied_by`; nginx's error log names its zone
    (and no other) for the requests just sent. The burst limit: requests as fast as they
    go (it admits BURST, plus RATE per second; LONG is out of reach). The per-minute
    limit: requests paced at PROOF_PACE per second, under what the burst limit admits
    (BURST + RATE per second), until LONG (plus, for nginx's leaky bucket, what it admits
    per second at LONG per minute)."""
    proofs = []
    if nginx_log:
        nginx_log.zones_since()  # start from here
    for limit, _ in MULTI_LIMITS:
        key = f"proof-{name.replace(' ', '-')}-{endpoint}-{limit}"
        if limit == "burst":
            state = drive(port, endpoint, key)
            least = BURST
            most = min(LONG - 1, BURST + 1 + RATE * state["seconds"] * 1.05 + PROOF_CONNECTIONS)
            limit_text = f"{RATE}/s with a burst of {BURST} (under {LONG} per minute)"
        else:
            state = drive(port, endpoint, key, pace=PROOF_PACE)
            least = LONG
            most = LONG + 1 + LONG / 60 * state["seconds"] * 1.05 + PROOF_CONNECTIONS
            limit_text = f"{LONG} per minute"
        what = f"{name} {state['path']} on one client id, limit {limit}"
        summary = check_proof(what, state, least, most, limit_text)
        if nginx_log:
            zones = nginx_log.zones_since()
            denier = "nginx error log: " + ", ".join(
                f"{count} denial{'s' if count > 1 else ''} by zone \"{zone}\""
                for zone, count in sorted(zones.items())) if zones else "no denial logged"
            if set(zones) != {limit}:
                raise SystemExit(f"http_bench: {what}: expected denials by zone \"{limit}\" "
                                 f"alone, the {denier} ({summary}); refusing to run")
        else:
            denied_by = json.loads(state["denial"])["denied_by"]
            denier = f"`denied_by: {json.dumps(denied_by)}`"
            if denied_by != [f"api.{limit}"]:
                raise SystemExit(f"http_bench: {what}: expected denied_by [\"api.{limit}\"], "
                                 f"got {denied_by} ({summary}); refusing to run")
        print(f"  proof: {what}: {summary}; {denier}", file=sys.stderr)
        proofs.append(dict(server=name, path=state["path"], limit=limit,
                           allowed=state["allowed"], sent=state["sent"],
                           seconds=state["seconds"], denier=denier))
    return proofs


def wrk(port, script, args):
    out = subprocess.run(["wrk", "-t", str(args.wrk_threads), "-c", str(args.connections),
                          "-d", args.duration, "--latency", "-s", script,
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 1, "ms": 1000, "s": 1_000_000}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return dict(rps=rps, p99_us=float(p99.group(1)) * scale,
                non2xx=int(non2xx.group(1)) if non2xx else 0)


def nginx_config(work, args, nginx_port, multi_port):
    """nginx with limit_req keyed by the client id, at floodgate's rule's rate and burst
    (generous, so the work is the zone lookup and update, as floodgate's is); on a second
    port, two zones on one location, MULTI_LIMITS' rates. The answer comes from empty_gif,
    a content-phase handler, so that limit_req (preaccess phase) runs first; `return`
    would answer in the rewrite phase and skip it. keepalive_requests lifted from its
    1000, as one tunes nginx for load: wrk's connections then stay open, as they do with
    floodgate and Node. Denials are logged at error level (limit_req_log_level's default),
    which the proofs read."""
    return f"""
worker_processes {args.server_threads};
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {work}/cb; proxy_temp_path {work}/px; fastcgi_temp_path {work}/fc;
  uwsgi_temp_path {work}/uw; scgi_temp_path {work}/sc;
  keepalive_requests 1000000;
  limit_req_zone $http_x_client_id zone=clients:64m rate={RATE}r/s;
  server {{
    listen 127.0.0.1:{nginx_port} reuseport;
    location / {{
      limit_req zone=clients burst={BURST} nodelay;
      limit_req_status 429;
      empty_gif;
    }}
  }}
  limit_req_zone $http_x_client_id zone=burst:64m rate={RATE}r/s;
  limit_req_zone $http_x_client_id zone=long:64m rate={LONG}r/m;
  server {{
    listen 127.0.0.1:{multi_port} reuseport;
    location / {{
      limit_req zone=burst burst={BURST} nodelay;
      limit_req zone=long burst={LONG} nodelay;
      limit_req_status 429;
      empty_gif;
    }}
  }}
}}
"""


def floodgate_config(path, limits):
    """A rule identifying clients by X-Client-Id, with one policy or several limits."""
    with open(path, "w") as f:
        f.write("rules:\n  - name: api\n    match: {path_prefix: /api}\n"
                "    identify: header:X-Client-Id\n")
        if len(limits) == 1:
            f.write(f"    policy: {limits[0][1]}\n")
        else:
            f.write("    limits:\n" + "".join(f"      - {{name: {name}, policy: \"{policy}\"}}\n"
                                            for name, policy in limits))


def start_floodgate(args, config, store, procs):
    port = free_port()
    proc = subprocess.Popen([args.floodgate, "serve", "--config", config, "--listen",
                             f"127.0.0.1:{port}", "--store", store, "--threads",
                             str(args.server_threads)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    wait_port(port, proc, "floodgate serve")
    return port


def save_multi(args, multi, proofs):
    """http_multi.md and http_multi.csv: the two-limit comparison, round by round."""
    n = args.server_threads
    limits = ", ".join(f"`{name}: {policy}`" for name, policy in MULTI_LIMITS)
    proof_text = "; ".join(
        f"{p['server']} limit `{p['limit']}`: {p['allowed']:,} allowed, then 429 "
        f"({p['sent']:,} requests in {p['seconds']:.2f} s{', paced' if p['limit'] != 'burst' else ''}; "
        f"{p['denier']})" for p in proofs)
    md = [f"### Several limits in one decision: HTTP ({time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores shared by wrk and the server)\n",
          f"`wrk -t{args.wrk_threads} -c{args.connections} -d{args.duration}` with a random "
          f"client id out of {CLIENTS:,} per request, as in the HTTP table. floodgate "
          f"({n} thread(s), memory://): `/v1/authz` under a rule with two limits, {limits}: "
          "one multi-decision per request, all or nothing. nginx "
          f"({n} worker(s)): two `limit_req` directives on one location, zones keyed by the "
          f"same client id, `rate={RATE}r/s burst={BURST} nodelay` and `rate={LONG}r/m "
          f"burst={LONG} nodelay`, `limit_req_status 429`, answering with `empty_gif`. No "
          "request of the measured load was denied on either side. Both sides back to back "
          f"in each round (the first alternating); every round shown, then the medians. "
          "Target: req/s ratio >= 1.0.\n",
          "Each limit on each side was proven to deny on its own before the run, on a fresh "
          "client id: the burst limit by requests as fast as they go (it must allow at least "
          f"{BURST:,}, fewer than {LONG:,}), the per-minute limit by requests paced at "
          f"{PROOF_PACE:,}/s, which the burst limit always admits (it must allow at least "
          f"{LONG:,}); floodgate's 429 names the limit that denied (`denied_by`), nginx's "
          "error log the zone (\"limiting requests ... by zone\"), and the bench refuses to "
          f"run unless it is that limit alone: {proof_text}.\n",
          "| round | floodgate req/s | floodgate p99 | nginx req/s | nginx p99 | req/s ratio | "
          "p99 ratio |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for i, r in enumerate(multi["rounds"], 1):
        md.append(f"| {i} | {r['contender']['rps']:,.0f} | {r['contender']['p99_us']:.0f} µs | "
                  f"{r['base']['rps']:,.0f} | {r['base']['p99_us']:.0f} µs | {r['ratio']:.2f} | "
                  f"{r['p99_ratio']:.2f} |")
    md.append(f"| median | {multi['rps']:,.0f} | {multi['p99']:.0f} µs | {multi['base_rps']:,.0f} | "
              f"{multi['base_p99']:.0f} µs | **{multi['ratio']:.2f}** | {multi['p99_ratio']:.2f} |")
    md.append("\nA p99 ratio below 1 means faster answers.")
    part_output.save(args.out, "http_multi.md", md, {"http_multi.csv": (
        ["round", "floodgate_rps", "floodgate_p99_us", "nginx_rps", "nginx_p99_us", "rps_ratio",
         "p99_ratio", "server_threads", "limits"],
        [[i, f"{r['contender']['rps']:.0f}", f"{r['contender']['p99_us']:.0f}",
          f"{r['base']['rps']:.0f}", f"{r['base']['p99_us']:.0f}", f"{r['ratio']:.4f}",
          f"{r['p99_ratio']:.4f}", n, " + ".join(p for _, p in MULTI_LIMITS)]
         for i, r in enumerate(multi["rounds"], 1)] +
        [["median", f"{multi['rps']:.0f}", f"{multi['p99']:.0f}", f"{multi['base_rps']:.0f}",
          f"{multi['base_p99']:.0f}", f"{multi['ratio']:.4f}", f"{multi['p99_ratio']:.4f}", n,
          " + ".join(p for _, p in MULTI_LIMITS)]])})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floodgate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="5s")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--server-threads", type=int, default=1)
    parser.add_argument("--only-multi", action="store_true",
                        help="only the two-limit comparison (http_multi.md)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="floodgate-http-bench-")
    procs = []
    try:
        scripts = {}
        for name, body in LUA.items():
            scripts[name] = os.path.join(work, f"{name}.lua")
            with open(scripts[name], "w") as f:
                f.write(body)

        def pair(base, contender):
            """Both sides back to back in each round (the side that runs first alternates),
            the per-round ratios (contender over base) of requests/s and of p99, and the
            medians over the rounds."""
            b, c, rps_ratio, p99_ratio = [], [], [], []
            for r in range(args.rounds):
                if r % 2 == 0:
                    x, y = wrk(*base, args), wrk(*contender, args)
                else:
                    y, x = wrk(*contender, args), wrk(*base, args)
                b.append(x)
                c.append(y)
                rps_ratio.append(y["rps"] / x["rps"])
                p99_ratio.append(y["p99_us"] / x["p99_us"])
            return dict(base_rps=statistics.median(x["rps"] for x in b),
                        base_p99=statistics.median(x["p99_us"] for x in b),
                        rps=statistics.median(x["rps"] for x in c),
                        p99=statistics.median(x["p99_us"] for x in c),
                        ratio=statistics.median(rps_ratio),
                        p99_ratio=statistics.median(p99_ratio),
                        non2xx=sum(x["non2xx"] for x in c),
                        base_non2xx=sum(x["non2xx"] for x in b),
                        rounds=[dict(base=x, contender=y, ratio=rr, p99_ratio=pr)
                                for x, y, rr, pr in zip(b, c, rps_ratio, p99_ratio)])

        nginx_port, nginx_multi_port = free_ports(2)
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_config(work, args, nginx_port, nginx_multi_port))
        nginx = subprocess.Popen(["nginx", "-p", work, "-c", conf, "-e", f"{work}/nginx-error.log"])
        procs.append(nginx)
        wait_port(nginx_port, nginx, "nginx")
        wait_port(nginx_multi_port, nginx, "nginx")

        # Several limits in one decision: floodgate on memory:// with the two limits
        # against nginx with the two zones, each limit proven first.
        multi_conf = os.path.join(work, "floodgate-multi.yaml")
        floodgate_config(multi_conf, MULTI_LIMITS)
        multi_port = start_floodgate(args, multi_conf, "memory://", procs)
        multi_proofs = prove_each_limit("nginx", nginx_multi_port, "nginx",
                                        ErrorLog(f"{work}/nginx-error.log"))
        multi_proofs += prove_each_limit("floodgate memory", multi_port, "authz")
        multi = pair((nginx_multi_port, scripts["nginx"]), (multi_port, scripts["authz"]))
        for i, r in enumerate(multi["rounds"], 1):
            print(f"  two limits, round {i}: floodgate memory /v1/authz "
                  f"{r['contender']['rps']:>9.0f} req/s (p99 {r['contender']['p99_us']:.0f} us)"
                  f"  nginx two zones {r['base']['rps']:>9.0f} req/s (p99 "
                  f"{r['base']['p99_us']:.0f} us)  ratio {r['ratio']:.2f}  p99 ratio "
                  f"{r['p99_ratio']:.2f}", file=sys.stderr)
        if multi["non2xx"] or multi["base_non2xx"]:
            raise SystemExit(f"http_bench: the two-limit load was denied (floodgate "
                             f"{multi['non2xx']}, nginx {multi['base_non2xx']} non-2xx "
                             "answers): the limits were meant to admit it")
        save_multi(args, multi, multi_proofs)
        if args.only_multi:
            return

        redis_port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                  "--dir", work, "--save", "", "--appendonly", "no",
                                  "--logfile", f"{work}/redis.log"])
        procs.append(redis)
        wait_port(redis_port, redis, "redis-server")

        fg_conf = os.path.join(work, "floodgate.yaml")
        floodgate_config(fg_conf, [("api", POLICY)])
        express_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "express")
        if not os.path.isdir(os.path.join(express_dir, "node_modules")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=express_dir,
                           check=True, stdout=subprocess.DEVNULL)
        express_port = free_port()
        express = subprocess.Popen(["node", "server.js", str(express_port), str(redis_port),
                                    str(args.server_threads)],
                                   cwd=express_dir, stdout=subprocess.DEVNULL)
        procs.append(express)
        wait_port(express_port, express, "express")

        servers = {}
        for store in ("memory://", f"redis://127.0.0.1:{redis_port}"):
            servers["memory" if store.startswith("memory") else "redis"] = start_floodgate(
                args, fg_conf, store, procs)

        targets = [(store, port, endpoint) for store, port in servers.items()
                   for endpoint in ("authz", "check")]
        targets.append(("express+redis", express_port, "authz"))
        proofs = [prove_limits("nginx", nginx_port, "nginx")]
        proofs += [prove_limits(name_of(store), port, endpoint)
                   for store, port, endpoint in targets]

        nginx = (nginx_port, scripts["nginx"])
        rows = {}
        for store, port, endpoint in targets:
            row = pair(nginx, (port, scripts[endpoint]))
            rows[(store, endpoint)] = row
            print(f"  {store:<13} /v1/{endpoint:<5} {row['rps']:>9.0f} req/s (p99 {row['p99']:.0f} us)"
                  f"  nginx {row['base_rps']:>9.0f} req/s  ratio {row['ratio']:.2f}"
                  f"  p99 ratio {row['p99_ratio']:.2f}", file=sys.stderr)
        # floodgate on Redis against Express on the same Redis, back to back.
        vs_express = pair((express_port, scripts["authz"]), (servers["redis"], scripts["authz"]))
        print(f"  floodgate redis vs express: {vs_express['ratio']:.2f}x req/s, "
              f"p99 {vs_express['p99_ratio']:.2f}x", file=sys.stderr)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)

    n = args.server_threads
    proof_text = "; ".join(f"{p['server']} `{p['path']}`: {p['allowed']:,} allowed, then "
                           f"{'`allowed: false`' if p['path'] == '/v1/check' else '429'} "
                           f"({p['sent']:,} requests in {p['seconds']:.2f} s)" for p in proofs)
    md = [f"### HTTP ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores shared by wrk and the server)\n",
          f"`wrk -t{args.wrk_threads} -c{args.connections} -d{args.duration}` with a random client id "
          f"out of {CLIENTS:,} per request. nginx runs {n} worker(s), floodgate {n} thread(s), "
          f"Express {n} Node process(es) (more than one through node:cluster, as Node users "
          "scale across cores). "
          f"nginx: `limit_req` keyed by the client id (`rate={RATE}r/s burst={BURST} nodelay`, "
          "`limit_req_status 429`), answering with `empty_gif` (content phase, so limit_req runs "
          "first), no upstream: the C baseline. "
          f"floodgate: a rule identifying clients by the same header, `{POLICY}`. "
          "express+redis: Express 4 with rate-limiter-flexible's `RateLimiterRedis` "
          f"({RATE} points per second) on the same Redis, ioredis auto-pipelining on. "
          f"Ratios are taken within each round; medians of {args.rounds} rounds. Target: >= 1.0x "
          "nginx on memory://.\n",
          "Each server was proven to limit before the run: requests over the limit on one client "
          f"id, through the path and limit that are measured, from {PROOF_CONNECTIONS} "
          "connections (the bench refuses to run unless each allows at least the burst, then "
          f"denies): {proof_text}.\n",
          "| server | endpoint | req/s | p99 | nginx limit_req req/s | nginx p99 | "
          "req/s ratio to nginx | p99 ratio to nginx |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (store, endpoint), r in rows.items():
        md.append(f"| {name_of(store)} | `/v1/{endpoint}` | {r['rps']:,.0f} | {r['p99']:.0f} µs | "
                  f"{r['base_rps']:,.0f} | {r['base_p99']:.0f} µs | **{r['ratio']:.2f}** | "
                  f"{r['p99_ratio']:.2f} |")
    v = vs_express
    md.append(f"\nfloodgate on Redis against Express + rate-limiter-flexible on the same Redis, "
              f"back to back in each round (`/v1/authz`): {v['rps']:,.0f} vs {v['base_rps']:,.0f} "
              f"req/s, **{v['ratio']:.2f}x**; p99 {v['p99']:.0f} µs vs {v['base_p99']:.0f} µs "
              f"({v['p99_ratio']:.2f}x). A p99 ratio below 1 means faster answers.")
    part_output.save(args.out, "http.md", md, {
        "http.csv": (
            ["server", "endpoint", "rps", "p99_us", "nginx_rps", "nginx_p99_us", "ratio_to_nginx",
             "p99_ratio_to_nginx", "server_threads"],
            [[name_of(store), f"/v1/{endpoint}",
              f"{r['rps']:.0f}", f"{r['p99']:.0f}", f"{r['base_rps']:.0f}", f"{r['base_p99']:.0f}",
              f"{r['ratio']:.4f}", f"{r['p99_ratio']:.4f}", n]
             for (store, endpoint), r in rows.items()]),
        "http_vs_express.csv": (
            ["floodgate_redis_rps", "floodgate_redis_p99_us", "express_rps", "express_p99_us",
             "rps_ratio", "p99_ratio"],
            [[f"{v['rps']:.0f}", f"{v['p99']:.0f}", f"{v['base_rps']:.0f}", f"{v['base_p99']:.0f}",
              f"{v['ratio']:.4f}", f"{v['p99_ratio']:.4f}"]]),
    })

if __name__ == "__main__":
    main()
