#!/usr/bin/python3
"""`floodgate serve --grpc-listen` spoken to by Python's grpcio: the RLS wire format.

Debian's python3-grpcio, with stubs protoc generated from proto/ at build time (PYTHONPATH): the
wire format as any client of upstream's service sees it. Tests named *_engine check the engine's
answers (upstream's semantics); the others the transport."""

import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc

from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from grpc_health_check import health_pb2

BINARY = os.environ["FLOODGATE_BINARY"]
# Guards against a hang, never a claim of speed: each wait ends with its event.
START_LIMIT_S = 60.0
CALL_LIMIT_S = 60

CONFIG = """domain: py
descriptors:
  - key: remote_address
    rate_limit: {unit: DAY, requests_per_unit: 2}
  - key: path
    value: "/api/*"
    rate_limit: {unit: HOUR, requests_per_unit: 4}
"""


def listening_ports(log_path, process, limit_s):
    """The HTTP and gRPC ports serve reports once it listens (it was given port 0 for both,
    so no two processes can pick the same), or None if it stopped or took too long."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with open(log_path) as f:
            log = f.read()
        http = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log)
        grpc_port = re.search(r"on grpc://127\.0\.0\.1:(\d+)", log)
        if http and grpc_port:
            return int(http.group(1)), int(grpc_port.group(1))
        if process.poll() is not None:
            return None
        time.sleep(0.01)
    return None


def request(domain, *descriptors, hits_addend=0):
    req = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
    for entries in descriptors:
        d = req.descriptors.add()
        for key, value in entries:
            d.entries.add(key=key, value=value)
    return req


class RlsServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runtime = tempfile.TemporaryDirectory(prefix="floodgate-rls-py-")
        config_dir = os.path.join(cls.runtime.name, "ratelimit", "config")
        os.makedirs(config_dir)
        with open(os.path.join(config_dir, "config.yaml"), "w") as f:
            f.write(CONFIG)
        cls.log = open(os.path.join(cls.runtime.name, "serve.log"), "w+")
        env = dict(os.environ, RUNTIME_ROOT=cls.runtime.name, RUNTIME_SUBDIRECTORY="ratelimit",
                   RUNTIME_IGNOREDOTFILES="true")
        cls.process = subprocess.Popen(
            [BINARY, "serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"],
            stdout=cls.log, stderr=subprocess.STDOUT, env=env)
        ports = listening_ports(cls.log.name, cls.process, START_LIMIT_S)
        if ports is None:
            cls.tearDownClass()
            raise RuntimeError("floodgate serve did not start: " + cls.read_log())
        cls.http_port, cls.grpc_port = ports
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")
        cls.stub = rls_pb2_grpc.RateLimitServiceStub(cls.channel)
        cls.health = cls.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)

    @classmethod
    def read_log(cls):
        cls.log.flush()
        with open(cls.log.name) as f:
            return f.read()

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "channel", None):
            cls.channel.close()
        cls.process.terminate()
        try:
            cls.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            cls.process.kill()
            cls.process.wait()
        cls.log.close()
        cls.runtime.cleanup()

    def http(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", method=method,
                                     data=body.encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=CALL_LIMIT_S) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def test_health_for_both_names(self):
        for name in ("", "ratelimit"):
            answer = self.health(health_pb2.HealthCheckRequest(service=name), timeout=CALL_LIMIT_S)
            self.assertEqual(answer.status, health_pb2.HealthCheckResponse.SERVING, name)

    def test_unknown_domain_is_ok_without_a_limit(self):
        answer = self.stub.ShouldRateLimit(
            request("no-such-domain", [("a", "1")], [("b", "2")]), timeout=CALL_LIMIT_S)
        self.assertEqual(answer.overall_code, rls_pb2.RateLimitResponse.OK)
        self.assertEqual(len(answer.statuses), 2)
        for status in answer.statuses:
            self.assertEqual(status.code, rls_pb2.RateLimitResponse.OK)
            self.assertFalse(status.HasField("current_limit"))

    def test_healthcheck_and_json(self):
        self.assertEqual(self.http("GET", "/healthcheck"), (200, "OK"))
        status, body = self.http(
            "POST", "/json",
            '{"domain":"no-such-domain","descriptors":[{"entries":[{"key":"a","value":"1"}]}]}')
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["overallCode"], "OK")
        self.assertEqual(self.http("POST", "/json", "not json")[0], 400)

    def test_over_limit_counts_engine(self):
        codes, remaining = [], []
        for _ in range(3):
            answer = self.stub.ShouldRateLimit(request("py", [("remote_address", "10.1.1.1")]),
                                               timeout=CALL_LIMIT_S)
            codes.append(answer.overall_code)
            remaining.append(answer.statuses[0].limit_remaining)
        R = rls_pb2.RateLimitResponse
        self.assertEqual(codes, [R.OK, R.OK, R.OVER_LIMIT])
        self.assertEqual(remaining, [1, 0, 0])
        self.assertEqual(answer.statuses[0].current_limit.requests_per_unit, 2)
        self.assertEqual(answer.statuses[0].current_limit.unit, R.RateLimit.DAY)

    def test_wildcard_and_hits_addend_engine(self):
        answer = self.stub.ShouldRateLimit(request("py", [("path", "/api/v1")], hits_addend=3),
                                           timeout=CALL_LIMIT_S)
        self.assertEqual(answer.statuses[0].current_limit.requests_per_unit, 4)
        self.assertEqual(answer.statuses[0].limit_remaining, 1)
        req = request("py", [("path", "/api/v1")])
        req.descriptors[0].hits_addend.value = 2  # the descriptor's own addend
        answer = self.stub.ShouldRateLimit(req, timeout=CALL_LIMIT_S)
        self.assertEqual(answer.overall_code, rls_pb2.RateLimitResponse.OVER_LIMIT)


if __name__ == "__main__":
    unittest.main()
