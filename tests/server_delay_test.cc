// delay= on the HTTP service: /v1/check's delay_us, /v1/authz holding its answer (without
// sockets: the answer's hold and place; on a socket: held, released, and a client that left).

#include <poll.h>

#include "hang_guard.h"
#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

constexpr const char* kDelayConfig = R"(
listen: 127.0.0.1:0
max_waiting: 2
rules:
  - name: fleet
    match: {path_prefix: /fleet}
    identify: header:X-Key
    policy: gcra:10/1s,burst=1,delay=1s
  - name: pair
    match: {path_prefix: /pair}
    identify: header:X-Key
    limits:
      - {name: burst, policy: 'gcra:10/1s,burst=1,delay=1s'}
      - {name: steady, policy: 'token_bucket:4/1s,burst=1,delay=500ms'}
)";

class DelayServiceTest : public ServiceTest {
 protected:
  DelayServiceTest() : ServiceTest(kDelayConfig) {}
  Response Authz(const char* key) {
    return Call(http::verb::get, "/v1/authz", "", {{"X-Original-URI", "/fleet/x"}, {"X-Key", key}});
  }
};

TEST_F(DelayServiceTest, CheckAnswersTheDelayAndRetryAfterOnlyWhenDenied) {
  const char* body = R"({"key":"k","policy":"gcra:10/1s,burst=1,delay=150ms"})";
  EXPECT_EQ(Body(Call(http::verb::post, "/v1/check", body))["delay_us"], 0);
  const Response delayed = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(Body(delayed)["allowed"], true);
  EXPECT_EQ(Body(delayed)["delay_us"], 100000);
  EXPECT_EQ(Header(delayed, "Retry-After"), "");
  const Response denied = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(Body(denied)["allowed"], false);
  EXPECT_EQ(Body(denied)["retry_after_us"], 50000);  // s - now - D = 200ms - 150ms
  EXPECT_EQ(Header(denied, "Retry-After"), "1");
}

// Several limits wait for their common start (docs/algorithms.md, "Waiting",
// multi-decisions): the later of the items' starts, within the least delay=.
TEST_F(DelayServiceTest, CheckOfSeveralLimitsAnswersTheirCommonDelay) {
  const char* body = R"({"items":[{"key":"k","policy":"gcra:10/1s,burst=1,delay=1s"},
                                  {"key":"k","policy":"token_bucket:4/1s,burst=1,delay=300ms"}]})";
  EXPECT_EQ(Body(Call(http::verb::post, "/v1/check", body))["delay_us"], 0);
  const nlohmann::json delayed = Body(Call(http::verb::post, "/v1/check", body));
  EXPECT_EQ(delayed["allowed"], true);
  EXPECT_EQ(delayed["delay_us"], 250000);  // the bucket's start; gcra alone would wait 100ms
  EXPECT_EQ(delayed["items"][0]["delay_us"], 250000);
  EXPECT_EQ(delayed["items"][1]["delay_us"], 250000);
  const Response denied = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(Body(denied)["allowed"], false);
  EXPECT_EQ(Body(denied)["delay_us"], 0);
  // The bucket's start is T+500ms, the allowance the least delay (300ms).
  EXPECT_EQ(Body(denied)["retry_after_us"], 200000);
  EXPECT_EQ(Body(denied)["denied_by"], nlohmann::json::array({"items[0]", "items[1]"}));
  EXPECT_EQ(Header(denied, "Retry-After"), "1");
}

TEST_F(DelayServiceTest, AuthzHoldsARuleOfSeveralLimitsForTheirCommonDelay) {
  const auto authz = [&] {
    return Call(http::verb::get, "/v1/authz", "", {{"X-Original-URI", "/pair/x"}, {"X-Key", "p"}});
  };
  EXPECT_EQ(authz().hold.count(), 0);
  const Response held = authz();
  EXPECT_EQ(held.result_int(), 204);
  EXPECT_EQ(held.hold, std::chrono::milliseconds(250));  // steady's start, burst's 100ms
  EXPECT_NE(held.place, nullptr);
  const Response last_slot = authz();  // steady's start T+500ms: just within its 500ms
  EXPECT_EQ(last_slot.result_int(), 204);
  EXPECT_EQ(last_slot.hold, std::chrono::milliseconds(500));
  const Response past = authz();  // T+750ms: beyond the least delay
  EXPECT_EQ(past.result_int(), 429);
  EXPECT_EQ(past.hold.count(), 0);
}

TEST_F(DelayServiceTest, AuthzHoldsADelayedAdmissionWithinMaxWaiting) {
  const Response first = Authz("a");
  EXPECT_EQ(first.result_int(), 204);
  EXPECT_EQ(first.hold.count(), 0);
  std::optional<Response> held = Authz("a");
  EXPECT_EQ(held->result_int(), 204);
  EXPECT_EQ(held->hold, std::chrono::milliseconds(100));
  EXPECT_NE(held->place, nullptr);
  const Response second = Authz("a");
  EXPECT_EQ(second.hold, std::chrono::milliseconds(200));
  // Two held answers alive: a third delayed one finds no place (and stays charged).
  const Response full = Authz("a");
  EXPECT_EQ(full.result_int(), 429);
  EXPECT_THAT(full.body, HasSubstr("rate_limit:too_many_waiting"));
  EXPECT_EQ(full.hold.count(), 0);
  EXPECT_THAT(Call(http::verb::get, "/metrics").body, HasSubstr("floodgate_authz_waiting 2\n"));
  // An answer gone (written, or its client left) gives its place back.
  held.reset();
  EXPECT_THAT(Call(http::verb::get, "/metrics").body, HasSubstr("floodgate_authz_waiting 1\n"));
  const Response again = Authz("a");
  EXPECT_EQ(again.result_int(), 204);
  EXPECT_EQ(again.hold, std::chrono::milliseconds(400));  // behind the refused one's charge
  // Past delay=: denied as ever, nothing held.
  for (int i = 0; i < 10; ++i) Authz("a");
  EXPECT_EQ(Authz("a").result_int(), 429);
}

TEST(DelayConfig, MaxWaitingIsBounded) {
  EXPECT_EQ(ParseConfig("", "t.yaml")->max_waiting, kDefaultMaxWaiting);
  EXPECT_THAT(std::string(MessageOf(ParseConfig("max_waiting: 0\n", "t.yaml").status())),
              HasSubstr("max_waiting"));
  EXPECT_EQ(ParseConfig("max_waiting: 7\n", "t.yaml")->max_waiting, 7);
}

// ---- on a socket -----------------------------------------------------------------------

constexpr const char* kHoldConfig = R"(
listen: 127.0.0.1:0
max_waiting: 1
rules:
  - name: slow
    match: {path_prefix: /slow}
    identify: header:X-Key
    policy: gcra:2/1h,burst=1,delay=1h
  - name: quick
    match: {path_prefix: /quick}
    identify: header:X-Key
    policy: gcra:100/1s,burst=1,delay=1s
)";

class HoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 1;
    server_ = std::make_unique<HttpServer>(service_, options);
    ASSERT_TRUE(server_->Start().ok());
  }
  tcp::socket Send(const char* path, const char* key) {
    tcp::socket socket(io_);
    socket.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    http::request<http::string_body> req(http::verb::get, "/v1/authz", 11);
    req.set(http::field::host, "localhost");
    req.set("X-Original-URI", path);
    req.set("X-Key", key);
    http::write(socket, req);
    return socket;
  }
  static int Status(tcp::socket& socket) {
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res.result_int();
  }
  int Waiting() {
    tcp::socket socket(io_);
    socket.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    http::request<http::string_body> req(http::verb::get, "/metrics", 11);
    req.set(http::field::host, "localhost");
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    const std::string& text = res.body();
    const std::size_t at = text.find("\nfloodgate_authz_waiting ");
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + 25));
  }
  // Polls the gauge until it reads `n`: the release is the event, bounded by kHangGuard.
  bool WaitingBecomes(int n) {
    const auto until = std::chrono::steady_clock::now() + floodgate::testing::kHangGuard;
    while (std::chrono::steady_clock::now() < until) {
      if (Waiting() == n) return true;
      std::this_thread::yield();
    }
    return false;
  }

  asio::io_context io_;
  Service service_{std::make_shared<MemoryStore>(),
                   std::make_shared<const ServerConfig>(*ParseConfig(kHoldConfig, "t.yaml"))};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HoldTest, AHeldAnswerComesAfterItsDelayAndAClientThatLeavesFreesItsPlace) {
  {
    tcp::socket first = Send("/quick", "q");
    EXPECT_EQ(Status(first), 204);
  }
  // Held 10 ms (E), then answered 204: the answer is the event waited for.
  tcp::socket quick = Send("/quick", "q");
  EXPECT_EQ(Status(quick), 204);
  EXPECT_TRUE(WaitingBecomes(0));

  tcp::socket slow_first = Send("/slow", "s");
  EXPECT_EQ(Status(slow_first), 204);
  std::optional<tcp::socket> held = Send("/slow", "s");  // 30 min ahead: held
  EXPECT_TRUE(WaitingBecomes(1));
  tcp::socket refused = Send("/slow", "t");
  EXPECT_EQ(Status(refused), 204);  // t's first: at once, needs no place
  tcp::socket no_place = Send("/slow", "t");
  EXPECT_EQ(Status(no_place), 429);  // max_waiting: 1 is taken
  held->close();                     // the client leaves while held
  held.reset();
  EXPECT_TRUE(WaitingBecomes(0));
}

}  // namespace
}  // namespace floodgate::server
