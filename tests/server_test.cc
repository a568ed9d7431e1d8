// The HTTP service: config parsing, request handling (no sockets), and the Beast server
// on a real loopback socket (limits, timeouts, bad bytes, keep-alive, shutdown).
#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/strings.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/service.h"

namespace floodgate::server {
namespace {

using ::testing::HasSubstr;
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

constexpr const char* kConfig = R"(
listen: 127.0.0.1:0
trusted_proxies: [10.0.0.0/8, ::1/128, 'fd00::/8']
rules:
  - name: login
    match: {path_prefix: /login, methods: [post]}
    identify: ip
    policy: sliding_log:3/15m
  - name: api
    match: {path_prefix: /api}
    identify: cookie:fgid
    policy: fixed_window:2/1h
  - name: keyed
    match: {path_prefix: /keyed}
    identify: ip+header:X-Api-Key
    policy: fixed_window:1/1h
    cost: 1
  - name: byheader
    match: {path_prefix: /byheader}
    identify: header:X-Api-Key
    policy: fixed_window:1/1h
)";

// ---- config ------------------------------------------------------------------------

TEST(Config, ParsesRulesAndDefaults) {
  auto config = ParseConfig(kConfig, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rules.size(), 4u);
  EXPECT_EQ(config->rules[0].methods, std::vector<std::string>{"POST"});
  EXPECT_EQ(config->store.url, "memory://");
  EXPECT_TRUE(config->listen_given);      // the environment may not override it
  EXPECT_FALSE(config->store_url_given);  // FLOODGATE_STORE may fill it in
  EXPECT_EQ(config->authz_deny_status, 429);
  EXPECT_TRUE(config->demo);
  ASSERT_EQ(config->MatchAll("POST", "/login/x").size(), 1u);
  EXPECT_EQ(config->MatchAll("POST", "/login/x")[0]->name, "login");
  EXPECT_TRUE(config->MatchAll("GET", "/login").empty());
  // A rule's single policy is one limit, named after the rule.
  ASSERT_EQ(config->rules[0].limits.size(), 1u);
  EXPECT_EQ(config->rules[0].limits[0].qualified, "login");
  EXPECT_TRUE(config->Trusted(asio::ip::make_address("10.1.2.3")));
  EXPECT_FALSE(config->Trusted(asio::ip::make_address("11.1.2.3")));
  EXPECT_TRUE(config->Trusted(asio::ip::make_address("::1")));
  EXPECT_TRUE(config->Trusted(asio::ip::make_address("fd12:3456::1")));
  EXPECT_FALSE(config->Trusted(asio::ip::make_address("fe80::1")));
  EXPECT_FALSE(config->Trusted(asio::ip::make_address("::2")));
  auto empty = ParseConfig("", "empty.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->listen, "127.0.0.1:8080");
}

TEST(Config, StoreOptionsReachTheRedisUrl) {
  auto config = ParseConfig(
      "store: {url: 'redis://h:1', prefix: 'x:', timeout: 20ms, "
      "on_error: fail_closed}",
      "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->store.EffectiveUrl(),
            "redis://h:1?prefix=x:&timeout=20000us&on_error=fail_closed&lazy_connect=1");
  // What the URL says wins.
  config = ParseConfig("store: {url: 'redis://h:1?lazy_connect=0&timeout=5ms'}", "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->store.EffectiveUrl(),
            "redis://h:1?lazy_connect=0&timeout=5ms&prefix=fg:&on_error=local");
}

struct BadConfig {
  std::string yaml;
  const char* message;
};
class ConfigRejects : public ::testing::TestWithParam<BadConfig> {};
TEST_P(ConfigRejects, NamingFileLineAndReason) {
  auto config = ParseConfig(GetParam().yaml, "bad.yaml");
  ASSERT_FALSE(config.ok()) << GetParam().yaml;
  EXPECT_THAT(std::string(MessageOf(config.status())), HasSubstr(GetParam().message));
}
INSTANTIATE_TEST_SUITE_P(
    Table, ConfigRejects,
    ::testing::Values(
        BadConfig{"listen: [1, 2", "bad.yaml:1:"},
        BadConfig{"colour: red", "bad.yaml:1: unknown key \"colour\""},
        BadConfig{"listen: nowhere", "bad.yaml:1: listen \"nowhere\" must be HOST:PORT"},
        BadConfig{"store: {on_error: maybe}", "store.on_error must be fail_open"},
        BadConfig{"store: {timeout: soon}", "store.timeout must be a duration"},
        BadConfig{"store: {url: 'mongo://h:1'}", "bad.yaml:1: store.url: unsupported store"},
        BadConfig{"store:\n  url: 'redis://h:1?colour=red'\n", "bad.yaml:2: store.url: "},
        BadConfig{"store: {url: 'memory://?max_keys=lots'}", "bad.yaml:1: store.url: "},
        BadConfig{"trusted_proxies: [10.0.0.0/33]", "is not an IP address or CIDR"},
        BadConfig{"authz_deny_status: 500", "authz_deny_status must be a whole number from 400"},
        BadConfig{"authz_deny_status: 404", "authz_deny_status must be 429 or 403"},
        BadConfig{"demo: perhaps", "demo must be true or false"},
        BadConfig{"rules:\n  - name: a\n    policy: gcra:10/1s,burst=0\n",
                  "bad.yaml:3: rules[0].policy: invalid policy \"gcra:10/1s,burst=0\": burst must "
                  "be >= 1, got 0"},
        BadConfig{"rules:\n  - policy: gcra:1/1s\n", "bad.yaml:2: rules[0] needs a name"},
        BadConfig{"rules:\n  - name: a\n    policy: gcra:1/1s\n    hold: 1m\n",
                  "bad.yaml:4: rules[0].hold is how long a reservation waits for its settle: "
                  "give it with cost_from_response: true"},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', cost_from_response: true, "
                  "hold: 2d}\n",
                  "bad.yaml:2: rules[0].hold must be a duration from 1ms to 24h, got \"2d\""},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', cost_from_response: yes please}\n",
                  "rules[0].cost_from_response must be true or false"},
        BadConfig{"rules:\n  - name: a\n", "rules[0] needs a policy"},
        BadConfig{
            "rules:\n  - {name: a, policy: 'gcra:1/1s'}\n  - {name: a, policy: 'gcra:1/1s'}\n",
            "bad.yaml:3: rule name \"a\" is used twice"},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', identify: 'ip+finger'}\n",
                  "unknown identity \"finger\""},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', match: {path_prefix: login}}\n",
                  "path_prefix must start with '/'"},
        BadConfig{"rules:\n  - {name: 'a b', policy: 'gcra:1/1s'}\n", "name must be 1-64 of"},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', cost: -1}\n",
                  "rules[0].cost must be a whole number from 0"},
        // Several limits per rule (docs/multi.md).
        BadConfig{"rules:\n  - name: a\n    limits:\n      - name: x\n        policy: gcra:1/1s\n"
                  "        colour: red\n",
                  "bad.yaml:6: unknown key \"colour\" in rules[0].limits[0] (known: name, policy, "
                  "shadow, overrides, policy_from)"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - {name: x, policy: 'gcra:1/1s'}\n"
                  "      - {name: x, policy: 'gcra:2/1s'}\n",
                  "bad.yaml:5: rules[0].limits: limit name \"x\" is used twice"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - {name: x, policy: 'gcra:1/1s'}\n"
                  "      - name: y\n        policy: gcra:10/1s,burst=0\n",
                  "bad.yaml:6: rules[0].limits[1].policy: invalid policy \"gcra:10/1s,burst=0\""},
        BadConfig{"rules:\n  - name: a\n    policy: gcra:1/1s\n    limits: [{name: x, policy: "
                  "'gcra:1/1s'}]\n",
                  "bad.yaml:2: rules[0] needs a policy or a list of limits (one of the two)"},
        BadConfig{"rules:\n  - name: a\n    limits: []\n",
                  "bad.yaml:3: rules[0].limits must be a list of 1 to 16 limits"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - name: x\n        policy: gcra:1/1s\n"
                  "        overrides: {big: 'gcra:1/0s'}\n",
                  "bad.yaml:6: rules[0].limits[0].overrides[\"big\"]: invalid policy"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - name: x\n"
                  "        policy_from: {header: X-Plan}\n",
                  "bad.yaml:5: rules[0].limits[0].policy_from needs a header and a map"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - name: x\n"
                  "        policy_from: {header: X-Plan, map: {free: 'gcra:1/1s'}}\n",
                  "bad.yaml:4: rules[0].limits[0] needs a policy (or a policy_from with a "
                  "default)"},
        BadConfig{"rules:\n  - name: a\n    limits:\n      - {name: x, policy: 'gcra:1/1s', "
                  "shadow: maybe}\n",
                  "bad.yaml:4: rules[0].limits[0].shadow must be true or false"},
        BadConfig{"shadow: 2\n", "bad.yaml:1: shadow must be true or false"},
        BadConfig{"rules:\n  - {name: a, policy: 'gcra:1/1s', identify: nobody}\n",
                  "unknown identity \"nobody\""},
        // Two rules matching one path with 9 limits each: 18 limits in one request.
        BadConfig{"rules:\n  - name: all\n    limits: [" +
                      [] {
                        std::string list;
                        for (int i = 0; i < 9; ++i) {
                          list += (i ? ", " : "") + std::string("{name: l") + std::to_string(i) +
                                  ", policy: 'gcra:1/1s'}";
                        }
                        return list +
                               "]\n  - name: api\n    match: {path_prefix: /api}\n    limits: [" +
                               list + "]\n";
                      }(),
                  "bad.yaml:4: a request to /api matches rules all, api with 18 limits in all; at "
                  "most 16 apply to one request"}),
    [](const auto& info) { return std::to_string(info.index); });

// ---- request handling, without sockets -------------------------------------------------

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest()
      : store_(std::make_shared<MemoryStore>()),
        service_(store_, std::make_shared<const ServerConfig>(*ParseConfig(kConfig, "t.yaml"))) {}

  Response Call(http::verb method, std::string target, std::string body = "",
                std::vector<std::pair<std::string, std::string>> headers = {},
                const char* peer = "127.0.0.1") {
    Request request(method, target, 11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    request.body() = std::move(body);
    request.prepare_payload();
    std::optional<Response> response;
    service_.Handle(request, asio::ip::make_address(peer),
                    [&](Response r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());  // memory:// answers inline
    return response.value_or(Response{});
  }
  static nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }
  static std::string Header(const Response& r, const char* name) {
    return std::string(r.Header(name));
  }

  std::shared_ptr<MemoryStore> store_;
  Service service_;
};

TEST_F(ServiceTest, CheckWithAPolicyAnswersTheDecisionAndHeaders) {
  Response r = Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(Body(r), nlohmann::json::parse(R"({"allowed":true,"limit":2,"remaining":1,
                                               "retry_after_us":0,"reset_after_us":500000})"));
  EXPECT_EQ(Header(r, "X-RateLimit-Limit"), "2");
  EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), "1");
  EXPECT_EQ(Header(r, "X-RateLimit-Reset"), "1");
  EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"policy\";q=2;w=1");
  EXPECT_EQ(Header(r, "RateLimit"), "\"policy\";r=1;t=1");
  EXPECT_EQ(Header(r, "Retry-After"), "");
  Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  r = Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_EQ(Header(r, "Retry-After"), "1");
}

TEST_F(ServiceTest, CheckWithARule) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Body(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api"})"))["allowed"],
              true);
  }
  Response r = Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api"})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"api\";q=2;w=3600");
  // A cost in the request overrides the rule's; cost 0 peeks.
  EXPECT_EQ(
      Body(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api","cost":0})"))["allowed"],
      true);
}

TEST_F(ServiceTest, ReserveThenSettleRefundsTheUnusedEstimateOnce) {
  const auto post = [&](const char* path, const std::string& body) {
    return Call(http::verb::post, path, body);
  };
  Response r = post("/v1/reserve", R"({"key":"u","policy":"gcra:10/1h","estimate":6})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  nlohmann::json body = Body(r);
  EXPECT_EQ(body["allowed"], true);
  EXPECT_EQ(body["remaining"], 4);
  EXPECT_EQ(body["hold_us"], 300'000'000);
  const std::string id = body["reservation"];
  EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), "4");

  r = post("/v1/settle", fmt::format(R"({{"reservation":"{}","actual":2}})", id));
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["remaining"], 8);
  r = post("/v1/settle", fmt::format(R"({{"reservation":"{}","actual":2}})", id));
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_EQ(Body(r)["code"], "not_found");
  // /v1/check on the same key and policy sees exactly the 8 the settle left.
  EXPECT_EQ(Body(post("/v1/check", R"({"key":"u","policy":"gcra:10/1h","cost":8})"))["allowed"],
            true);
  EXPECT_EQ(Body(post("/v1/check", R"({"key":"u","policy":"gcra:10/1h"})"))["allowed"], false);

  // A denied reservation holds nothing and carries no id.
  r = post("/v1/reserve", R"({"key":"u","policy":"gcra:10/1h","estimate":1})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_FALSE(Body(r).contains("reservation"));
  EXPECT_EQ(Header(r, "Retry-After").empty(), false);
}

TEST_F(ServiceTest, ReserveOnARuleSharesTheRuleLimitWithCheck) {
  const auto post = [&](const char* path, const std::string& body) {
    return Body(Call(http::verb::post, path, body));
  };
  // api: fixed_window:2/1h, keyed as /v1/check keys it.
  nlohmann::json reserved = post("/v1/reserve", R"({"key":"k","rule":"api","estimate":2})");
  ASSERT_EQ(reserved["allowed"], true) << reserved;
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], false);
  const std::string settle =
      fmt::format(R"({{"reservation":"{}","actual":1}})", std::string(reserved["reservation"]));
  EXPECT_EQ(post("/v1/settle", settle)["remaining"], 1);
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], true);
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], false);
}

// docs/leases.md over HTTP: N leases, the next denied until a release; a released or
// unknown lease is 404; a check may only peek at a concurrency limit; bad input is named.
TEST_F(ServiceTest, AcquireHoldsALeaseUntilItsRelease) {
  const auto post = [&](const char* path, const std::string& body) {
    return Call(http::verb::post, path, body);
  };
  const std::string acquire = R"({"key":"export","policy":"concurrency:2,lease=1m"})";
  std::vector<std::string> leases;
  for (int i = 0; i < 2; ++i) {
    const Response r = post("/v1/acquire", acquire);
    ASSERT_EQ(r.result_int(), 200) << r.body;
    const nlohmann::json body = Body(r);
    EXPECT_EQ(body["allowed"], true);
    EXPECT_EQ(body["remaining"], 1 - i);
    EXPECT_EQ(body["lease_us"], 60'000'000);
    leases.push_back(body["lease"]);
  }
  EXPECT_NE(leases[0], leases[1]);
  Response r = post("/v1/acquire", acquire);
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_FALSE(Body(r).contains("lease"));
  EXPECT_FALSE(Header(r, "Retry-After").empty()) << "the earliest lease expiry";

  r = post("/v1/release", fmt::format(R"({{"lease":"{}"}})", leases[0]));
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["remaining"], 1);
  r = post("/v1/release", fmt::format(R"({{"lease":"{}"}})", leases[0]));
  EXPECT_EQ(r.result_int(), 404) << "released already";
  EXPECT_EQ(post("/v1/release", R"({"lease":"0123456789abcdef"})").result_int(), 404);
  EXPECT_EQ(Body(post("/v1/acquire", acquire))["allowed"], true) << "the freed lease";

  const auto refused = [&](const char* path, const char* body, const char* message) {
    const Response answer = post(path, body);
    EXPECT_EQ(answer.result_int(), 400) << path << " " << body << ": " << answer.body;
    EXPECT_THAT(std::string(Body(answer)["message"]), HasSubstr(message)) << body;
  };
  refused("/v1/check", R"({"key":"export","policy":"concurrency:2,lease=1m"})",
          "held with Acquire and freed with Release");
  EXPECT_EQ(
      Body(post("/v1/check",
                R"({"key":"export","policy":"concurrency:2,lease=1m","cost":0})"))["remaining"],
      0);
  refused("/v1/acquire", R"({"key":"export","policy":"gcra:1/1s"})",
          "acquired under a concurrency policy");
  refused("/v1/acquire", R"({"key":"export","policy":"concurrency:2","estimate":1})",
          "unknown field \"estimate\"");
  refused("/v1/reserve", R"({"key":"export","policy":"concurrency:2,lease=1m","estimate":1})",
          "use Acquire");
  refused("/v1/release", R"({"reservation":"x"})", "unknown field \"reservation\"");
  refused("/v1/release", "{}", "missing \"lease\"");
}

TEST_F(ServiceTest, ReserveAndSettleRefuseBadInputWithTheReason) {
  const auto expect = [&](const char* path, const char* body, int status, const char* message) {
    const Response r = Call(http::verb::post, path, body);
    EXPECT_EQ(r.result_int(), status) << path << " " << body << ": " << r.body;
    EXPECT_THAT(std::string(Body(r)["message"]), HasSubstr(message)) << path << " " << body;
  };
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s"})", 400, "missing \"estimate\"");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":0})", 400,
         "estimate must be between 1 and");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":1,"cost":1})", 400,
         "unknown field \"cost\" (key, rule, policy, estimate, hold_ms)");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":"1"})", 400,
         "\"estimate\" must be a whole number");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":1,"hold_ms":0})", 400,
         "\"hold_ms\" must be from 1 to 86400000");
  expect("/v1/reserve", R"({"key":"u","rule":"nope","estimate":1})", 404, "unknown rule \"nope\"");
  expect("/v1/reserve", R"({"key":"u","rule":"api","policy":"gcra:1/1s","estimate":1})", 400,
         "exactly one of");
  expect("/v1/reserve", "[1]", 400, "the body must be a JSON object");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef"})", 400, "missing \"actual\"");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef","actual":-1})", 400,
         "actual must be between 0 and");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef","actual":1})", 404,
         "unknown reservation");
  EXPECT_EQ(Call(http::verb::get, "/v1/reserve").result_int(), 405);
  EXPECT_EQ(Call(http::verb::get, "/v1/settle").result_int(), 405);
}

struct BadCheck {
  const char* body;
  int status;
  const char* message;
};
class CheckRejects : public ServiceTest, public ::testing::WithParamInterface<BadCheck> {};
TEST_P(CheckRejects, WithTheRightStatusAndMessage) {
  const Response r = Call(http::verb::post, "/v1/check", GetParam().body);
  EXPECT_EQ(r.result_int(), GetParam().status) << GetParam().body;
  const auto body = Body(r);
  EXPECT_EQ(body["status"], GetParam().status);
  EXPECT_THAT(body["message"].get<std::string>(), HasSubstr(GetParam().message));
  EXPECT_EQ(store_->Stats().keys, 0u);  // nothing was decided
}
INSTANTIATE_TEST_SUITE_P(
    Table, CheckRejects,
    ::testing::Values(
        BadCheck{"{not json", 400, "the body must be a JSON object"},
        BadCheck{"[1,2]", 400, "the body must be a JSON object"},
        BadCheck{"", 400, "the body must be a JSON object"},
        BadCheck{R"({"policy":"gcra:1/1s"})", 400, "missing \"key\""},
        BadCheck{R"({"key":7,"policy":"gcra:1/1s"})", 400, "\"key\" must be a string"},
        BadCheck{R"({"key":"","policy":"gcra:1/1s"})", 400, "\"key\" must not be empty"},
        BadCheck{R"({"key":"k"})", 400, "give exactly one of \"rule\" and \"policy\""},
        BadCheck{R"({"key":"k","rule":"api","policy":"gcra:1/1s"})", 400, "exactly one"},
        BadCheck{R"({"key":"k","rule":"nope"})", 404, "unknown rule \"nope\""},
        BadCheck{R"({"key":"k","policy":"gcra:0/1s"})", 400, "limit must be between 1"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":-1})", 400, "\"cost\" must be"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":1e20})", 400, "\"cost\" must be"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":"1"})", 400, "\"cost\" must be"}),
    [](const auto& info) { return std::to_string(info.index); });

TEST_F(ServiceTest, CheckRejectsAKeyOver512Bytes) {
  const std::string body = R"({"key":")" + std::string(513, 'k') + R"(","policy":"gcra:1/1s"})";
  const Response r = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr("513 bytes; the limit is 512"));
  EXPECT_EQ(Call(http::verb::get, "/v1/check").result_int(), 405);
}

TEST_F(ServiceTest, AuthzAllowsThenDeniesWithHeadersAndBody) {
  const std::vector<std::pair<std::string, std::string>> login = {
      {"X-Original-URI", "/login?next=/"}, {"X-Original-Method", "POST"}};
  for (int i = 0; i < 3; ++i) {
    const Response r = Call(http::verb::get, "/v1/authz", "", login);
    EXPECT_EQ(r.result_int(), 204);
    EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), std::to_string(2 - i));
  }
  Response r = Call(http::verb::get, "/v1/authz", "", login);
  EXPECT_EQ(r.result_int(), 429);
  // The spec's body, plus the limit(s) that denied (issue 12).
  EXPECT_EQ(r.body, R"({"status": 429, "code": "rate_limit:exceeded", "denied_by": ["login"]})");
  EXPECT_EQ(Header(r, "Retry-After"), "900");
  EXPECT_EQ(Call(http::verb::get, "/v1/authz?deny_status=403", "", login).result_int(), 403);
  // No rule matches a GET of /login: allowed without touching the store.
  const auto keys = store_->Stats().keys;
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", {{"X-Original-URI", "/login"}}).result_int(),
            204);
  EXPECT_EQ(store_->Stats().keys, keys);
}

TEST_F(ServiceTest, TrustedProxiesDecideWhichAddressIsTheClient) {
  const auto login = [&](const char* peer, const char* xff) {
    std::vector<std::pair<std::string, std::string>> h = {{"X-Original-URI", "/login"},
                                                          {"X-Original-Method", "POST"}};
    if (xff != nullptr) h.emplace_back("X-Forwarded-For", xff);
    return Call(http::verb::post, "/v1/authz", "", h, peer).result_int();
  };
  // Behind the trusted proxy 10.0.0.1, two clients get separate limits.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("10.0.0.1", "203.0.113.5, 10.0.0.9"), 204);
  EXPECT_EQ(login("10.0.0.1", "203.0.113.5, 10.0.0.9"), 429);
  EXPECT_EQ(login("10.0.0.1", "203.0.113.6"), 204);
  // An untrusted peer's X-Forwarded-For is ignored: spoofing gains nothing.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("198.51.100.7", "1.2.3.4"), 204);
  EXPECT_EQ(login("198.51.100.7", "5.6.7.8"), 429);
  // Several X-Forwarded-For lines, in any letter case, read as one list.
  const auto two_lines = [&] {
    return Call(http::verb::post, "/v1/authz", "",
                {{"X-Original-URI", "/login"},
                 {"X-Original-Method", "POST"},
                 {"x-forwarded-for", "198.18.0.1"},
                 {"X-FORWARDED-FOR", "10.0.0.7"}},
                "10.0.0.1")
        .result_int();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(two_lines(), 204);
  EXPECT_EQ(login("10.0.0.1", "198.18.0.1"), 429);  // the same client as above
  // The right-most untrusted address is the client, not a spoofed left-most one.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("::1", "9.9.9.9, 192.0.2.1, 10.0.0.3"), 204);
  EXPECT_EQ(login("::1", "1.1.1.1, 192.0.2.1"), 429);
  // IPv6 all the way: a trusted IPv6 proxy range, IPv6 hops, an IPv6 client.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("fd00::7", "2001:db8::1, fd00::9"), 204);
  EXPECT_EQ(login("fd00::8", "2001:db8::1"), 429);
  EXPECT_EQ(login("fd00::7", "2001:db8::2, fd00::9"), 204);
  // An untrusted IPv6 peer is the client, whatever it forwards.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("2001:db8::66", "2001:db8::2"), 204);
  EXPECT_EQ(login("2001:db8::66", "2001:db8::3"), 429);
}

TEST_F(ServiceTest, CookieIdentityIssuesAnAnonymousCookieAndFallsBackToTheIp) {
  const std::vector<std::pair<std::string, std::string>> api = {{"X-Original-URI", "/api/x"}};
  const Response first = Call(http::verb::get, "/v1/authz", "", api);
  const std::string cookie = Header(first, "Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("fgid="));
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Lax"));
  const std::string id = cookie.substr(5, 36);
  EXPECT_EQ(id[14], '7');  // UUID version 7
  // Without the cookie, the IP's limit applies: a second cookie-less request is denied.
  Call(http::verb::get, "/v1/authz", "", api);
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", api).result_int(), 429);
  // With the cookie: its own limit, and no new cookie.
  auto with = api;
  with.emplace_back("Cookie", "other=1; fgid=" + id);
  const Response r = Call(http::verb::get, "/v1/authz", "", with);
  EXPECT_EQ(r.result_int(), 204);
  EXPECT_EQ(Header(r, "Set-Cookie"), "");
  // A forged cookie value is not trusted as an identity.
  auto forged = api;
  forged.emplace_back("Cookie", "fgid=anything");
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", forged).result_int(), 429);
}

TEST_F(ServiceTest, HeaderIdentityGivesEachValueItsOwnLimit) {
  const auto authz = [&](const char* path, const char* api_key, const char* peer) {
    std::vector<std::pair<std::string, std::string>> h = {{"X-Original-URI", path}};
    if (api_key != nullptr) h.emplace_back("X-Api-Key", api_key);
    return Call(http::verb::get, "/v1/authz", "", h, peer).result_int();
  };
  // header:X-Api-Key alone: one limit per key, whichever address sends it.
  EXPECT_EQ(authz("/byheader", "alpha", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/byheader", "alpha", "192.0.2.2"), 429);
  EXPECT_EQ(authz("/byheader", "beta", "192.0.2.1"), 204);
  // Without the header, the address is the identity.
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.3"), 204);
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.3"), 429);
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.4"), 204);
  // ip+header:X-Api-Key: both must match to share a limit.
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.1"), 429);
  EXPECT_EQ(authz("/keyed", "beta", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.2"), 204);
}

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

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.request_timeout = std::chrono::milliseconds(500);
    server_ = std::make_unique<HttpServer>(service_, options);
    ASSERT_TRUE(server_->Start().ok());
  }
  tcp::socket Connect() {
    tcp::socket socket(io_);
    socket.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
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

TEST_F(HttpServerTest, GarbageGetsA400AndAClosedConnection) {
  // A TLS ClientHello's first bytes (NULs included), then noise.
  static constexpr char kGarbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n";
  const std::string reply = Raw(std::string(kGarbage, sizeof kGarbage - 1));
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 400"));
  EXPECT_EQ(Get("/healthz"), 200);
}

TEST_F(HttpServerTest, ASlowOrSilentClientIsCutOffWhileOthersAreServed) {
  tcp::socket slow = Connect();
  asio::write(slow,
              asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n")));  // never ends
  tcp::socket silent = Connect();   // half-open: sends nothing
  EXPECT_EQ(Get("/healthz"), 200);  // meanwhile everyone else is served
  const auto closed = [](tcp::socket& s) {
    char c;
    beast::error_code ec;
    s.read_some(asio::buffer(&c, 1), ec);  // returns when the server closes (after 500 ms)
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  };
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed(slow));
  EXPECT_TRUE(closed(silent));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
}

TEST_F(HttpServerTest, ShutdownClosesIdleConnectionsAndReturns) {
  tcp::socket idle = Connect();
  EXPECT_EQ(Get("/healthz"), 200);
  const auto begin = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  EXPECT_EQ(server_->connections(), 0u);
  beast::error_code ec;
  tcp::socket after(io_);
  after.connect({asio::ip::make_address("127.0.0.1"), server_->port()}, ec);
  EXPECT_TRUE(ec);  // no longer accepting
}

}  // namespace
}  // namespace floodgate::server
