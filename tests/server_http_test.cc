// The rest of the HTTP API (metrics, health, demo, unknown paths) and the server on a socket.

#include <poll.h>

#include "hang_guard.h"
#include "server/render.h"
#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

TEST_F(ServiceTest, MetricsCountEveryResultAndShowEveryFamily) {
  const std::vector<std::pair<std::string, std::string>> login = {{"X-Original-URI", "/login"},
                                                                  {"X-Original-Method", "POST"}};
  for (int i = 0; i < 5; ++i) Call(http::verb::get, "/v1/authz", "", login);  // limit 3
  const std::string text = Call(http::verb::get, "/metrics").body;
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"login\",result=\"allowed\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"login\",result=\"denied\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"login\",result=\"degraded\"} 0\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("floodgate_build_info\\{version=\"[0-9]+\\.[0-9]+\\.["
                                             "0-9]+\",store=\"memory://[^\"]*\"\\} 1"));
  EXPECT_THAT(text, HasSubstr("floodgate_store_latency_seconds_count 5\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_memory_keys 1\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_memory_evictions_total 0\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_memory_expired_total 0\n"));
  // Every sample line belongs to a family announced with HELP and TYPE.
  std::istringstream lines(text);
  std::set<std::string> announced;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) {
      announced.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.starts_with("#")) {
      std::string family = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (family.ends_with(suffix) && !announced.contains(family)) {
          family.resize(family.size() - std::string_view(suffix).size());
        }
      }
      EXPECT_TRUE(announced.contains(family)) << line;
    }
  }
}

// A rule with a penalty block (docs/algorithms.md, "Blocks"): its blocked denials are
// counted per rule, and the answer says the key is blocked.
class BlockServiceTest : public ServiceTest {
 protected:
  BlockServiceTest()
      : ServiceTest(R"(
listen: 127.0.0.1:0
rules:
  - name: reset
    match: {path_prefix: /reset}
    identify: ip
    policy: gcra:1/1h,block=15m
  - name: api
    match: {path_prefix: /api}
    identify: ip
    policy: gcra:1/1h
)") {}
};

TEST_F(BlockServiceTest, MetricsCountBlockedDenialsPerRule) {
  for (const char* path : {"/reset", "/reset", "/reset", "/api", "/api"}) {
    Call(http::verb::get, "/v1/authz", "", {{"X-Original-URI", path}});
  }
  const Response check = Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"reset"})");
  EXPECT_EQ(Body(check)["blocked"], nlohmann::json());  // the first request: admitted
  const nlohmann::json denied =
      Body(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"reset"})"));
  EXPECT_EQ(denied["allowed"], false);
  EXPECT_EQ(denied["blocked"], true);
  EXPECT_GT(denied["retry_after_us"].get<std::int64_t>(), 15 * 60'000'000);  // the gcra's hour
  const std::string text = Call(http::verb::get, "/metrics").body;
  // Two /v1/authz denials and one /v1/check denial, each under the block.
  EXPECT_THAT(text, HasSubstr("floodgate_blocked_total{rule=\"reset\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_blocked_total{rule=\"api\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"denied\"} 1\n"));
}

TEST_F(ServiceTest, HealthReadyMetricsDemoAndUnknownPaths) {
  EXPECT_EQ(Call(http::verb::get, "/healthz").result_int(), 200);
  EXPECT_EQ(Call(http::verb::get, "/readyz").result_int(), 200);
  Call(http::verb::post, "/v1/check", R"({"key":"secret-client-key","rule":"api"})");
  const Response metrics = Call(http::verb::get, "/metrics");
  EXPECT_EQ(metrics.result_int(), 200);
  EXPECT_THAT(metrics.body,
              HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"allowed\"} 1"));
  EXPECT_THAT(metrics.body, HasSubstr("floodgate_store_latency_seconds_count"));
  EXPECT_THAT(metrics.body, HasSubstr("floodgate_memory_keys 1"));
  EXPECT_THAT(metrics.body, ::testing::Not(HasSubstr("secret-client-key")));
  const Response page = Call(http::verb::get, "/");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_THAT(page.body, HasSubstr("memory://"));
  EXPECT_THAT(page.body, ::testing::Not(HasSubstr("__FLOODGATE_STORE__")));
  EXPECT_EQ(Call(http::verb::get, "/nope").result_int(), 404);
}

// ---- the server on a socket ------------------------------------------------------------

// Whether the peer closed `socket` (EOF or a reset), waiting for it at most kHangGuard:
// the close is the event, and how soon it comes is not what a test asserts.
bool ClosedByPeer(tcp::socket& socket) {
  pollfd ready{socket.native_handle(), POLLIN, 0};
  const auto guard =
      std::chrono::duration_cast<std::chrono::milliseconds>(floodgate::testing::kHangGuard);
  if (poll(&ready, 1, static_cast<int>(guard.count())) != 1) return false;  // still open
  char c;
  beast::error_code ec;
  socket.read_some(asio::buffer(&c, 1), ec);
  return ec == asio::error::eof || ec == asio::error::connection_reset;
}

class HttpServerTest : public ::testing::Test {
 protected:
  // The default request timeout (10 s): no request here may be cut off by a loaded
  // machine's pause. The test of the timeout starts a server of its own.
  void SetUp() override { server_ = StartServer(HttpOptions{}); }
  std::unique_ptr<HttpServer> StartServer(HttpOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    auto server = std::make_unique<HttpServer>(service_, options);
    EXPECT_TRUE(server->Start().ok());
    return server;
  }
  tcp::socket Connect() { return Connect(*server_); }
  tcp::socket Connect(const HttpServer& server) {
    tcp::socket socket(io_);
    socket.connect({asio::ip::make_address("127.0.0.1"), server.port()});
    return socket;
  }
  // Sends raw bytes, reads until the server closes or `limit` passes.
  std::string Raw(const std::string& bytes) {
    tcp::socket socket = Connect();
    beast::error_code write_error;  // the server may refuse before reading everything
    asio::write(socket, asio::buffer(bytes), write_error);
    std::string out;
    beast::error_code ec;
    char buffer[4096];
    while (true) {
      const std::size_t n = socket.read_some(asio::buffer(buffer), ec);
      if (ec) break;
      out.append(buffer, n);
    }
    return out;
  }
  int Get(const std::string& target) {
    tcp::socket socket = Connect();
    http::request<http::string_body> req(http::verb::get, target, 11);
    req.set(http::field::host, "localhost");
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res.result_int();
  }

  asio::io_context io_;
  Service service_{std::make_shared<MemoryStore>(),
                   std::make_shared<const ServerConfig>(*ParseConfig(kConfig, "t.yaml"))};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  tcp::socket socket = Connect();
  beast::flat_buffer buffer;
  for (int i = 0; i < 3; ++i) {
    http::request<http::string_body> req(http::verb::post, "/v1/check", 11);
    req.set(http::field::host, "localhost");
    req.body() = R"({"key":"ka","policy":"fixed_window:10/1h"})";
    req.prepare_payload();
    http::write(socket, req);
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(nlohmann::json::parse(res.body())["remaining"], 9 - i);
  }
}

TEST_F(HttpServerTest, OversizedHeadersAndBodiesAreRefused) {
  const std::string big_header =
      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(17000, 'a') + "\r\n\r\n";
  EXPECT_THAT(Raw(big_header), HasSubstr("HTTP/1.1 431"));
  const std::string big_body =
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n" +
      std::string(70000, 'b');
  EXPECT_THAT(Raw(big_body), HasSubstr("HTTP/1.1 413"));
  EXPECT_EQ(Get("/healthz"), 200);
}

// Issue 39: fields arriving over several reads passed Beast's per-read limit twice over
// (32,730 bytes accepted). The request line and fields together are at most 16 KiB.
TEST_F(HttpServerTest, TheHeaderIsBoundedInAllHoweverItArrives) {
  // A header of exactly `bytes`, in fields of about 40 bytes (each read of the server
  // ends inside one).
  const auto header_of = [](std::size_t bytes) {
    std::string header = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    for (int i = 0; header.size() + 2 + 48 < bytes; ++i) {
      header += fmt::format("X-Field-{:05}: {}\r\n", i, std::string(24, 'a'));
    }
    header += "X-Last: " + std::string(bytes - header.size() - 2 - 10, 'z') + "\r\n\r\n";
    EXPECT_EQ(header.size(), bytes);
    return header;
  };
  EXPECT_THAT(Raw(header_of(16 * 1024)), HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(Raw(header_of(16 * 1024 + 1)), HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(Raw(header_of(20'000)), HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(Raw(header_of(32'730)), HasSubstr("HTTP/1.1 431"));
  EXPECT_EQ(Get("/healthz"), 200);
}

TEST_F(HttpServerTest, GarbageGetsA400AndAClosedConnection) {
  // A TLS ClientHello's first bytes (NULs included), then noise.
  static constexpr char kGarbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n";
  const std::string reply = Raw(std::string(kGarbage, sizeof kGarbage - 1));
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 400"));
  EXPECT_EQ(Get("/healthz"), 200);
}

// A request that never ends, and a connection that sends nothing, are closed by the server
// (not before the request timeout), while others are served meanwhile.
TEST_F(HttpServerTest, ASlowOrSilentClientIsCutOffWhileOthersAreServed) {
  HttpOptions options;
  options.request_timeout = std::chrono::milliseconds(500);
  const std::unique_ptr<HttpServer> server = StartServer(options);
  const auto connected_at = std::chrono::steady_clock::now();
  tcp::socket slow = Connect(*server);
  asio::write(slow,
              asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n")));  // never ends
  tcp::socket silent = Connect(*server);  // half-open: sends nothing
  EXPECT_EQ(Get("/healthz"), 200);        // meanwhile everyone else is served
  EXPECT_TRUE(ClosedByPeer(slow));
  EXPECT_TRUE(ClosedByPeer(silent));
  EXPECT_GE(std::chrono::steady_clock::now() - connected_at, options.request_timeout);
}

// Shutdown closes an idle connection and returns without waiting out its grace (a guard
// of minutes here: a shutdown that waited for the idle connection would not return
// within kHangGuard).
TEST_F(HttpServerTest, ShutdownClosesIdleConnectionsAndReturns) {
  tcp::socket idle = Connect();
  EXPECT_EQ(Get("/healthz"), 200);
  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(2 * floodgate::testing::kHangGuard); });
  EXPECT_EQ(shutdown.wait_for(floodgate::testing::kHangGuard), std::future_status::ready);
  EXPECT_TRUE(ClosedByPeer(idle));
  EXPECT_EQ(server_->connections(), 0u);
  beast::error_code ec;
  tcp::socket after(io_);
  after.connect({asio::ip::make_address("127.0.0.1"), server_->port()}, ec);
  EXPECT_TRUE(ec);  // no longer accepting
}

// ---- store errors: one mapping to HTTP statuses on every endpoint -------------------------

TEST(StoreErrors, MapToOneHttpStatusEach) {
  const auto status = [](absl::StatusCode code) {
    const auto [http_status, name] = HttpStatusOf(code);
    return fmt::format("{} {}", static_cast<int>(http_status), name);
  };
  EXPECT_EQ(status(absl::StatusCode::kInvalidArgument), "400 invalid_argument");
  EXPECT_EQ(status(absl::StatusCode::kNotFound), "404 not_found");
  EXPECT_EQ(status(absl::StatusCode::kResourceExhausted), "503 resource_exhausted");
  EXPECT_EQ(status(absl::StatusCode::kUnimplemented), "501 unimplemented");
  EXPECT_EQ(status(absl::StatusCode::kUnavailable), "503 unavailable");
  EXPECT_EQ(status(absl::StatusCode::kDeadlineExceeded), "503 unavailable");
  EXPECT_EQ(status(absl::StatusCode::kCancelled), "503 unavailable");
  EXPECT_EQ(status(absl::StatusCode::kInternal), "500 internal");
  EXPECT_EQ(status(absl::StatusCode::kFailedPrecondition), "500 internal");
}

// A store whose every decision fails with one status.
class FailingStore final : public Store {
 public:
  explicit FailingStore(absl::Status status) : status_(std::move(status)) {}
  StoreStats Stats() const override { return {}; }
  std::string Describe() const override { return "failing://"; }

 protected:
  absl::StatusOr<Decision> DecideValidated(const DecideRequest&) override { return status_; }
  absl::StatusOr<MultiDecision> DecideAllValidated(const MultiRequest&) override { return status_; }

 private:
  absl::Status status_;
};

TEST(StoreErrors, EveryDecidingEndpointAnswersThemAlike) {
  for (const absl::Status& failure :
       {absl::UnavailableError("redis at h:1 is not connected"),
        absl::InvalidArgumentError("two items on one key"), absl::CancelledError("store closed")}) {
    Service service(std::make_shared<FailingStore>(failure),
                    std::make_shared<const ServerConfig>(*ParseConfig(kConfig, "t.yaml")));
    const auto call = [&](http::verb method, const char* target, const char* body,
                          std::vector<std::pair<std::string, std::string>> headers = {}) {
      Request request(method, target, 11);
      for (const auto& [name, value] : headers) request.insert(name, value);
      request.body() = body;
      request.prepare_payload();
      std::optional<Response> response;
      service.Handle(request, asio::ip::make_address("127.0.0.1"),
                     [&](Response r) { response = std::move(r); });
      return response.value_or(Response{});
    };
    const auto [want, code] = HttpStatusOf(failure.code());
    for (const Response& r :
         {call(http::verb::post, "/v1/check", R"({"key":"k","policy":"gcra:1/1s"})"),
          call(http::verb::post, "/v1/check", R"({"key":"k","rule":"login"})"),
          call(http::verb::post, "/v1/check", R"({"items":[{"key":"k","policy":"gcra:1/1s"}]})"),
          call(http::verb::get, "/v1/authz", "",
               {{"X-Original-URI", "/login"}, {"X-Original-Method", "POST"}})}) {
      EXPECT_EQ(r.result_int(), static_cast<int>(want)) << failure << ": " << r.body;
      const auto body = nlohmann::json::parse(r.body);
      EXPECT_EQ(body["code"], std::string(code)) << failure;
      EXPECT_EQ(body["message"], std::string(failure.message()));
    }
  }
}

}  // namespace
}  // namespace floodgate::server
