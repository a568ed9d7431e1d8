#!/usr/bin/python3
"""`floodgate ratelimit` with CONFIG_TYPE=GRPC_XDS_SOTW, configured by an xDS server written here.

The management server is Python's grpcio (Debian's python3-grpcio) with stubs protoc generated from
proto/ at build time (PYTHONPATH), serving Envoy's AggregatedDiscoveryService as Envoy Gateway's
does for upstream's ratelimit: RateLimitConfig resources over a State-of-the-World stream. The
process decides on a real redis-server. Checked: the ports open only once the first response is
handled, a good config is ACKed and decides, a bad one is NACKed with the reason and the last good
config keeps deciding, and a restarted server is dialled again and its config applied. Every wait
ends with its event; the limits are guards against a hang, never claims of speed."""

import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request
from concurrent import futures

import grpc

from envoy.service.discovery.v3 import discovery_pb2, discovery_pb2_grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from ratelimit.config.ratelimit.v3 import rls_conf_pb2

BINARY = os.environ["FLOODGATE_BINARY"]
GUARD_S = 60.0
TYPE_URL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"


def wait_until(predicate, what):
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("no " + what + " within the hang guard")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Ads(discovery_pb2_grpc.AggregatedDiscoveryServiceServicer):
    """Records every DiscoveryRequest; sends the responses the test queues."""

    def __init__(self):
        self.requests = []
        self.changed = threading.Condition()
        self.outgoing = queue.Queue()

    def StreamAggregatedResources(self, request_iterator, context):
        def read():
            try:
                for request in request_iterator:
                    with self.changed:
                        self.requests.append(request)
                        self.changed.notify_all()
            except grpc.RpcError:
                pass  # the stream ended (the server stopped): the client dials again
        threading.Thread(target=read, daemon=True).start()
        while context.is_active():
            try:
                response = self.outgoing.get(timeout=0.05)
            except queue.Empty:
                continue
            yield response

    def request(self, n):
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.requests) > n, timeout=GUARD_S):
                raise AssertionError(f"no request #{n} from the client")
            return self.requests[n]


class AdsServer:
    def __init__(self, port):
        self.ads = Ads()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        discovery_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(self.ads, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def stop(self):
        self.server.stop(0).wait(GUARD_S)


def response(version, nonce, per_hour, unit=rls_conf_pb2.HOUR):
    config = rls_conf_pb2.RateLimitConfig(name="edge-config", domain="edge")
    d = config.descriptors.add(key="client")
    d.rate_limit.unit = unit
    d.rate_limit.requests_per_unit = per_hour
    out = discovery_pb2.DiscoveryResponse(version_info=version, nonce=nonce, type_url=TYPE_URL)
    out.resources.add().Pack(config)
    return out


class XdsRatelimitTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="floodgate-xds-py-")
        self.redis_port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: port_open(self.redis_port), "redis-server")
        self.xds = AdsServer(0)
        self.log = open(os.path.join(self.dir.name, "ratelimit.log"), "w+")
        env = dict(os.environ, USE_STATSD="false", LOG_LEVEL="debug", REDIS_SOCKET_TYPE="tcp",
                   REDIS_URL=f"127.0.0.1:{self.redis_port}", CONFIG_TYPE="GRPC_XDS_SOTW",
                   CONFIG_GRPC_XDS_SERVER_URL=f"127.0.0.1:{self.xds.port}",
                   CONFIG_GRPC_XDS_NODE_ID="test-node", HOST="127.0.0.1", PORT="0",
                   GRPC_HOST="127.0.0.1", GRPC_PORT="0", DEBUG_HOST="127.0.0.1", DEBUG_PORT="0",
                   XDS_CLIENT_BACKOFF_INITIAL_INTERVAL="50ms",
                   XDS_CLIENT_BACKOFF_MAX_INTERVAL="100ms")
        self.process = subprocess.Popen([BINARY, "ratelimit"], stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env)
        self.channel = None

    def tearDown(self):
        if self.channel:
            self.channel.close()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.xds.stop()
        self.redis.kill()
        self.redis.wait()
        self.log.close()
        self.dir.cleanup()

    def read_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def ports(self):
        def found():
            if self.process.poll() is not None:
                raise AssertionError("ratelimit exited: " + self.read_log())
            return re.search(r"HTTP on 127\.0\.0\.1:(\d+), gRPC on 127\.0\.0\.1:(\d+), "
                             r"debug on 127\.0\.0\.1:(\d+)", self.read_log())
        match = wait_until(found, "listening line")
        return int(match.group(1)), int(match.group(2)), int(match.group(3))

    def codes(self, value, n):
        """The overall codes of n calls for descriptor client=value."""
        out = []
        for _ in range(n):
            req = rls_pb2.RateLimitRequest(domain="edge")
            req.descriptors.add().entries.add(key="client", value=value)
            out.append(self.stub.ShouldRateLimit(req, timeout=GUARD_S).overall_code)
        return out

    def expect_limit(self, limit, tag):
        """limit calls allowed, the next denied, on a value of its own; a round that crossed an
        hour (a new window) is not judged and runs again, three rounds at most."""
        ok, over = rls_pb2.RateLimitResponse.OK, rls_pb2.RateLimitResponse.OVER_LIMIT
        for attempt in range(3):
            hour = int(time.time() // 3600)
            got = self.codes(f"{tag}-{attempt}-{os.getpid()}", limit + 1)
            if int(time.time() // 3600) == hour:
                self.assertEqual(got, [ok] * limit + [over], tag)
                return
        self.fail("three rounds crossed an hour")

    def test_acks_nacks_and_survives_a_server_restart(self):
        # Before the first response the process waits: the first request arrived, and no port
        # is open (upstream's NewService blocks on the first config event).
        first = self.xds.ads.request(0)
        self.assertEqual(first.type_url, TYPE_URL)
        self.assertEqual(first.node.id, "test-node")
        self.assertEqual(first.version_info, "")
        wait_until(lambda: "Waiting for initial ratelimit config update event" in self.read_log(),
                   "waiting line")
        self.assertNotRegex(self.read_log(), r"HTTP on 127\.0\.0\.1:\d+")

        self.xds.ads.outgoing.put(response("v1", "n1", 2))
        http_port, grpc_port, debug_port = self.ports()
        ack = self.xds.ads.request(1)
        self.assertEqual((ack.version_info, ack.response_nonce), ("v1", "n1"))
        self.assertFalse(ack.HasField("error_detail"))
        self.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        self.stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)
        self.expect_limit(2, "v1")
        with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/rlconfig",
                                    timeout=GUARD_S) as page:
            self.assertIn("edge.client: unit=HOUR requests_per_unit=2", page.read().decode())

        # A config the loader refuses: NACKed with the version applied and the reason; v1 decides.
        self.xds.ads.outgoing.put(response("v2", "n2", 5, unit=rls_conf_pb2.UNKNOWN))
        nack = self.xds.ads.request(2)
        self.assertEqual((nack.version_info, nack.response_nonce), ("v1", "n2"))
        self.assertIn("invalid rate limit unit", nack.error_detail.message)
        self.expect_limit(2, "after-nack")

        self.xds.ads.outgoing.put(response("v3", "n3", 3))
        self.assertEqual(self.xds.ads.request(3).version_info, "v3")
        self.expect_limit(3, "v3")

        # The management server restarts on its port: the client dials it again, telling it
        # what it applied, and takes its config.
        port = self.xds.port
        self.xds.stop()
        self.xds = AdsServer(port)
        again = self.xds.ads.request(0)
        self.assertEqual((again.version_info, again.response_nonce), ("v3", "n3"))
        self.xds.ads.outgoing.put(response("v4", "n4", 1))
        self.assertEqual(self.xds.ads.request(1).version_info, "v4")
        self.expect_limit(1, "v4")

        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics",
                                    timeout=GUARD_S) as page:
            metrics = page.read().decode()
        self.assertIn('floodgate_rls_xds_responses_total{answer="nack"} 1', metrics)
        self.assertIn('floodgate_rls_config_load_total{result="error"} 1', metrics)

        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(self.process.wait(timeout=GUARD_S), 0, self.read_log())


if __name__ == "__main__":
    unittest.main()
