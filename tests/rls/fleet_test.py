#!/usr/bin/python3
"""A fleet of envoyproxy/ratelimit and floodgate replicas on one Redis, and on one Redis Cluster.

The upstream replica is a model of upstream's Redis cache, read from its
src/redis/fixed_cache_impl.go and src/limiter/{cache_key,base_limiter}.go at commit f2fb15770f7f:
the key CACHE_KEY_PREFIX + domain + '_' + key_value pairs + '_' + window start, and per descriptor
INCRBY key hits, EXPIRE key unit (+ jitter), pipelined, over limit when the count after passes the
limit. Beside it, floodgate as `ratelimit` (upstream's environment) and as `serve` (an RLS config
and --store). A seeded random trace of a fixed count of requests goes to the three in turn; each
answer must be what one upstream replica alone would answer (a dict of counts in this process),
and afterwards every key, its count and its TTL in Redis are the model's. The requests are sent
one after the other, so upstream's own race (two replicas between their INCRBY and EXPIRE) never
arises and the answers are exact."""

import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import grpc

from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

BINARY = os.environ["FLOODGATE_BINARY"]
# Guards against a hang, never a claim of speed: each wait ends with its event.
HANG_GUARD_S = 60.0
REQUESTS = 300
SEED = 35

DOMAIN = "fleet"
PREFIX = "fg35_"
# No floodgate extension: upstream's counters. HOUR and DAY keep the trace inside one window
# (the test waits out an hour's last minute before it starts).
LIMITS = {"user": (7, "HOUR", 3600), "path": (4, "DAY", 86400)}
CONFIG = """domain: fleet
descriptors:
  - key: user
    rate_limit: {unit: HOUR, requests_per_unit: 7}
  - key: path
    rate_limit: {unit: DAY, requests_per_unit: 4}
"""
JITTER_S = 300  # serve keeps upstream's default; ratelimit is given 0


def free_port(bus=False):
    """A loopback port free now (and its cluster bus port, port + 10000, when asked)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not bus:
            return port
        if port + 10000 > 65535:
            continue
        with socket.socket() as b:
            try:
                b.bind(("127.0.0.1", port + 10000))
                return port
            except OSError:
                continue


class Resp:
    """A RESP client on one connection: commands pipelined, replies read in order."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
        self.file = self.sock.makefile("rb")

    def close(self):
        self.file.close()
        self.sock.close()

    def pipeline(self, commands):
        out = b""
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return [self.read() for _ in commands]

    def call(self, *args):
        return self.pipeline([args])[0]

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def crc16(data):
    """Redis Cluster's key hash: CRC16-XMODEM."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot_of(key):
    key = key.encode()
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) % 16384


class Redis:
    """One redis-server, or a cluster of three primaries; stopped by PID."""

    def __init__(self, directory, cluster):
        self.processes = []
        self.ports = []
        for i in range(3 if cluster else 1):
            port = free_port(bus=cluster)
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", directory]
            if cluster:
                args += ["--cluster-enabled", "yes", "--cluster-config-file",
                         "nodes-%d.conf" % port, "--cluster-node-timeout", "60000"]
            self.processes.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL))
            self.ports.append(port)
        for port in self.ports:
            self.wait(lambda: self.answers(port), "redis-server on %d" % port)
        self.slots = None
        if cluster:
            subprocess.run(["redis-cli", "--cluster", "create"] +
                           ["127.0.0.1:%d" % p for p in self.ports] +
                           ["--cluster-replicas", "0", "--cluster-yes"],
                           check=True, stdout=subprocess.DEVNULL, timeout=HANG_GUARD_S)
            self.wait(self.cluster_ok, "cluster_state:ok")
            first = Resp(self.ports[0])
            self.slots = [(lo, hi, node[1]) for lo, hi, node, *_ in
                          first.call("CLUSTER", "SLOTS")]
            first.close()
        self.connections = {p: Resp(p) for p in self.ports}

    @staticmethod
    def wait(check, what):
        deadline = time.monotonic() + HANG_GUARD_S
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError("waited too long for " + what)
            time.sleep(0.05)

    @staticmethod
    def answers(port):
        try:
            r = Resp(port)
            ok = r.call("PING") == "PONG"
            r.close()
            return ok
        except OSError:
            return False

    def cluster_ok(self):
        for port in self.ports:
            r = Resp(port)
            info = r.call("CLUSTER", "INFO")
            r.close()
            if "cluster_state:ok" not in info:
                return False
        return True

    def node_of(self, key):
        if self.slots is None:
            return self.connections[self.ports[0]]
        slot = slot_of(key)
        for lo, hi, port in self.slots:
            if lo <= slot <= hi:
                return self.connections[port]
        raise RuntimeError("no node serves slot %d" % slot)

    def keys(self, pattern):
        found = []
        for r in self.connections.values():
            found += r.call("KEYS", pattern)
        return sorted(found)

    def stop(self):
        for r in self.connections.values():
            r.close()
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            p.wait(timeout=HANG_GUARD_S)


class UpstreamModel:
    """What one upstream replica's fixed_cache_impl.go does on Redis, without a local cache and
    with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT false (the defaults)."""

    def __init__(self, redis, prefix, jitter_s, rng):
        self.redis, self.prefix, self.jitter_s, self.rng = redis, prefix, jitter_s, rng

    def key(self, domain, entries, unit_s, now):
        key = self.prefix + domain + "_"
        for k, v in entries:
            key += k + "_" + v + "_"
        return key + str((now // unit_s) * unit_s)

    def should_rate_limit(self, req):
        now = int(time.time())
        statuses = []
        for d in req.descriptors:
            entries = [(e.key, e.value) for e in d.entries]
            limit, unit, unit_s = LIMITS[entries[-1][0]]
            hits = req.hits_addend or 1
            key = self.key(req.domain, entries, unit_s, now)
            expire = unit_s + (self.rng.randrange(self.jitter_s) if self.jitter_s > 0 else 0)
            # INCRBY and EXPIRE pipelined, as upstream's radix client sends them.
            after, _ = self.redis.node_of(key).pipeline(
                [("INCRBY", key, hits), ("EXPIRE", key, expire)])
            over = after > limit
            statuses.append((over, 0 if over else limit - after))
        return statuses


def expected(counts, req, now):
    """One upstream fleet's answer: the counts kept here, as Redis would hold them."""
    out = []
    for d in req.descriptors:
        entries = [(e.key, e.value) for e in d.entries]
        limit, _, unit_s = LIMITS[entries[-1][0]]
        key = UpstreamModel(None, PREFIX, 0, None).key(req.domain, entries, unit_s, now)
        counts[key] = counts.get(key, 0) + (req.hits_addend or 1)
        over = counts[key] > limit
        out.append((over, 0 if over else limit - counts[key]))
    return out


def started(log_path, process, pattern):
    """The port the log names once the process listens, or None if it stopped first."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        with open(log_path) as f:
            found = re.search(pattern, f.read())
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            return None
        time.sleep(0.02)
    return None


class Fleet:
    """floodgate as `ratelimit` and as `serve`, both on `redis`."""

    def __init__(self, directory, redis, cluster):
        root = os.path.join(directory, "runtime")
        os.makedirs(os.path.join(root, "ratelimit", "config"))
        with open(os.path.join(root, "ratelimit", "config", "fleet.yaml"), "w") as f:
            f.write(CONFIG)
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RUNTIME_ROOT": root,
                "RUNTIME_SUBDIRECTORY": "ratelimit", "CACHE_KEY_PREFIX": PREFIX}
        seeds = ",".join("127.0.0.1:%d" % p for p in redis.ports)
        upstream_env = dict(base, USE_STATSD="false", LOG_LEVEL="info", REDIS_SOCKET_TYPE="tcp",
                            REDIS_URL=seeds, REDIS_TYPE="cluster" if cluster else "single",
                            HOST="127.0.0.1", PORT="0", GRPC_HOST="127.0.0.1", GRPC_PORT="0",
                            DEBUG_HOST="127.0.0.1", DEBUG_PORT="0",
                            EXPIRATION_JITTER_MAX_SECONDS="0", REDIS_TIMEOUT="60s")
        # The timeouts are guards: every answer judged here must come from Redis, and a
        # loaded TSan run outlasted serve's default store timeout (UNAVAILABLE, once).
        # lazy_connect=0: serve listens only once Redis answers, as `ratelimit` does.
        store = (("redis-cluster://" if cluster else "redis://") + seeds +
                 "?timeout=60s&lazy_connect=0")
        self.processes, self.logs, self.channels, self.stubs = [], [], [], []
        for name, args, env, pattern in (
                ("ratelimit", [BINARY, "ratelimit"], upstream_env, r"gRPC on [^,]*:(\d+)"),
                ("serve", [BINARY, "serve", "--listen", "127.0.0.1:0", "--grpc-listen",
                           "127.0.0.1:0", "--store", store], base,
                 r"on grpc://127\.0\.0\.1:(\d+)")):
            log = open(os.path.join(directory, name + ".log"), "w+")
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
            self.processes.append(process)
            self.logs.append(log)
            port = started(log.name, process, pattern)
            if port is None:
                log.flush()
                with open(log.name) as f:
                    raise RuntimeError("%s did not start: %s" % (name, f.read()))
            channel = grpc.insecure_channel("127.0.0.1:%d" % port)
            self.channels.append(channel)
            self.stubs.append(rls_pb2_grpc.RateLimitServiceStub(channel))

    def stop(self):
        for c in self.channels:
            c.close()
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            try:
                p.wait(timeout=HANG_GUARD_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


def random_request(rng):
    req = rls_pb2.RateLimitRequest(domain=DOMAIN, hits_addend=rng.choice([0, 0, 1, 2]))
    user = rng.choice(["ann", "bob", "cy"])
    d = req.descriptors.add()
    d.entries.add(key="user", value=user)
    if rng.random() < 0.5:
        d = req.descriptors.add()
        d.entries.add(key="path", value=rng.choice(["/a", "/b"]))
    return req


class FleetTest(unittest.TestCase):
    def run_fleet(self, cluster):
        directory = tempfile.mkdtemp(prefix="floodgate-fleet-")
        redis = fleet = None
        try:
            redis = Redis(directory, cluster)
            fleet = Fleet(directory, redis, cluster)
            # The trace stays in one hour's window (time alignment, not synchronisation).
            while time.time() % 3600 > 3540:
                time.sleep(1)
            rng = random.Random(SEED)
            model = UpstreamModel(redis, PREFIX, JITTER_S, random.Random(SEED + 1))
            counts = {}
            answered_by = [0, 0, 0]
            for i in range(REQUESTS):
                req = random_request(rng)
                now = int(time.time())
                want = expected(counts, req, now)
                replica = rng.randrange(3)
                answered_by[replica] += 1
                if replica == 2:
                    got = model.should_rate_limit(req)
                else:
                    answer = self.stubs_call(fleet, replica, req)
                    got = [(s.code == rls_pb2.RateLimitResponse.OVER_LIMIT, s.limit_remaining)
                           for s in answer.statuses]
                    over = any(o for o, _ in want)
                    self.assertEqual(answer.overall_code,
                                     rls_pb2.RateLimitResponse.OVER_LIMIT if over
                                     else rls_pb2.RateLimitResponse.OK, i)
                self.assertEqual(got, want, "request %d to replica %d" % (i, replica))
            self.assertTrue(all(n > 50 for n in answered_by), answered_by)
            # Upstream's keys, exactly, with the counts and TTLs upstream gives them.
            self.assertEqual(redis.keys(PREFIX + "*"), sorted(counts))
            for key, count in counts.items():
                node = redis.node_of(key)
                self.assertEqual(node.call("GET", key), str(count), key)
                ttl = node.call("TTL", key)
                unit_s = LIMITS["path" if "_path_" in key else "user"][2]
                # The last writer's TTL: 0 jitter (ratelimit), up to 299 s (serve, the model).
                self.assertTrue(unit_s - 60 <= ttl < unit_s + JITTER_S, (key, ttl))
            # Over the limit counts on, as upstream's INCRBY does.
            self.assertTrue(any(c > LIMITS["user"][0] for k, c in counts.items()
                                if "_user_" in k), counts)
        finally:
            if fleet:
                fleet.stop()
            if redis:
                redis.stop()
            shutil.rmtree(directory, ignore_errors=True)

    @staticmethod
    def stubs_call(fleet, replica, req):
        return fleet.stubs[replica].ShouldRateLimit(req, timeout=HANG_GUARD_S)

    def test_per_second_redis(self):
        """REDIS_PERSECOND: SECOND limits count on the second Redis, the others on the first."""
        directory = tempfile.mkdtemp(prefix="floodgate-fleet-")
        main = second = process = channel = log = None
        try:
            main, second = Redis(directory, False), Redis(directory, False)
            root = os.path.join(directory, "runtime")
            os.makedirs(os.path.join(root, "ratelimit", "config"))
            with open(os.path.join(root, "ratelimit", "config", "ps.yaml"), "w") as f:
                f.write("domain: ps\ndescriptors:\n"
                        "  - key: s\n    rate_limit: {unit: SECOND, requests_per_unit: 100}\n"
                        "  - key: h\n    rate_limit: {unit: HOUR, requests_per_unit: 100}\n")
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RUNTIME_ROOT": root,
                   "RUNTIME_SUBDIRECTORY": "ratelimit", "USE_STATSD": "false",
                   "LOG_LEVEL": "info", "HOST": "127.0.0.1", "PORT": "0",
                   "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0", "DEBUG_HOST": "127.0.0.1",
                   "DEBUG_PORT": "0", "REDIS_SOCKET_TYPE": "tcp",
                   "REDIS_URL": "127.0.0.1:%d" % main.ports[0], "REDIS_PERSECOND": "true",
                   "REDIS_PERSECOND_SOCKET_TYPE": "tcp",
                   "REDIS_PERSECOND_URL": "127.0.0.1:%d" % second.ports[0]}
            log = open(os.path.join(directory, "ratelimit.log"), "w+")
            process = subprocess.Popen([BINARY, "ratelimit"], stdout=log,
                                       stderr=subprocess.STDOUT, env=env)
            port = started(log.name, process, r"gRPC on [^,]*:(\d+)")
            if port is None:
                log.flush()
                with open(log.name) as f:
                    self.fail("ratelimit did not start: " + f.read())
            channel = grpc.insecure_channel("127.0.0.1:%d" % port)
            req = rls_pb2.RateLimitRequest(domain="ps")
            req.descriptors.add().entries.add(key="s", value="x")
            req.descriptors.add().entries.add(key="h", value="x")
            answer = rls_pb2_grpc.RateLimitServiceStub(channel).ShouldRateLimit(
                req, timeout=HANG_GUARD_S)
            self.assertEqual(answer.overall_code, rls_pb2.RateLimitResponse.OK)
            self.assertEqual([k.split("_")[1] for k in second.keys("ps_*")], ["s"])
            self.assertEqual([k.split("_")[1] for k in main.keys("ps_*")], ["h"])
        finally:
            if channel:
                channel.close()
            if process:
                process.terminate()
                process.wait(timeout=HANG_GUARD_S)
            if log:
                log.close()
            for redis in (main, second):
                if redis:
                    redis.stop()
            shutil.rmtree(directory, ignore_errors=True)

    def test_one_redis(self):
        self.run_fleet(cluster=False)

    def test_one_cluster(self):
        self.run_fleet(cluster=True)


if __name__ == "__main__":
    unittest.main()
