// The service with several limits per request (docs/multi.md), without sockets.
//
// Stacked limits of a rule, every matching rule, shadow limits, overrides and plans, /v1/check
// "items", and the headers, bodies and metrics they produce.
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/config.h"
#include "server/service.h"

namespace floodgate::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Headers = std::vector<std::pair<std::string, std::string>>;

// Sliding logs over long periods: exact counts, and no window ends during a test.
constexpr const char* kConfig = R"(
listen: 127.0.0.1:0
rules:
  - name: api
    match: {path_prefix: /api}
    identify: header:X-Api-Key
    limits:
      - name: burst
        policy: sliding_log:3/1h
        overrides: {big: 'sliding_log:10/1h'}
      - {name: daily, policy: 'sliding_log:5/1d'}
  - name: global
    match: {path_prefix: /}
    identify: none
    limits: [{name: all, policy: 'sliding_log:1000/1h'}]
  - name: plans
    match: {path_prefix: /plans}
    identify: header:X-Api-Key
    limits:
      - name: rate
        policy_from:
          header: X-Plan
          map: {free: 'sliding_log:1/1h', pro: 'sliding_log:3/1h'}
          default: 'sliding_log:2/1h'
  - name: rollout
    match: {path_prefix: /rollout}
    identify: ip
    limits:
      - {name: old, policy: 'sliding_log:5/1h'}
      - {name: new, policy: 'sliding_log:2/1h', shadow: true}
  - name: llm
    match: {path_prefix: /llm}
    identify: header:X-Api-Key
    policy: 'sliding_log:20/1h'
    cost: 5
    cost_from_response: true
    hold: 1m
  - name: exports
    match: {path_prefix: /exports}
    identify: header:X-Api-Key
    limits:
      - {name: rate, policy: 'sliding_log:100/1h'}
      - {name: running, policy: 'concurrency:2,lease=1h'}
)";

class MultiServiceTest : public ::testing::Test {
 protected:
  explicit MultiServiceTest(std::string yaml = kConfig)
      : store_(std::make_shared<MemoryStore>()),
        service_(store_, std::make_shared<const ServerConfig>(*ParseConfig(yaml, "t.yaml"))) {}

  Response Call(http::verb method, std::string target, std::string body = "",
                const Headers& headers = {}) {
    Request request(method, target, 11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    request.body() = std::move(body);
    request.prepare_payload();
    std::optional<Response> response;
    service_.Handle(request, boost::asio::ip::make_address("127.0.0.1"),
                    [&](Response r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());  // memory:// answers inline
    return response.value_or(Response{});
  }
  Response Authz(std::string uri, Headers headers = {}) {
    headers.emplace_back("X-Original-URI", std::move(uri));
    return Call(http::verb::get, "/v1/authz", "", headers);
  }
  Response Check(std::string body) { return Call(http::verb::post, "/v1/check", std::move(body)); }
  std::string Metrics() { return Call(http::verb::get, "/metrics").body; }
  static nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }
  static std::string Header(const Response& r, const char* name) {
    return std::string(r.Header(name));
  }

  std::shared_ptr<MemoryStore> store_;
  Service service_;
};

// The tighter limit denies; the denied requests spend none of the other limits, so the
// daily limit still has what the admitted requests left.
TEST_F(MultiServiceTest, StackedLimitsDenyByTheTighterAndSpendNothingOnDenial) {
  const Headers key = {{"X-Api-Key", "k1"}};
  for (int i = 0; i < 3; ++i) {
    const Response r = Authz("/api/x", key);
    EXPECT_EQ(r.result_int(), 204);
    EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), std::to_string(2 - i));  // the burst binds
  }
  for (int i = 0; i < 10; ++i) {
    const Response r = Authz("/api/x", key);
    ASSERT_EQ(r.result_int(), 429);
    EXPECT_EQ(r.body,
              R"({"status": 429, "code": "rate_limit:exceeded", "denied_by": ["api.burst"]})");
    EXPECT_EQ(Header(r, "X-RateLimit-Limit"), "3");
    EXPECT_EQ(Header(r, "Retry-After"), "3600");
    // Every limit that applies, with what it has left: the daily limit lost only the 3
    // admitted requests, and so did the global one.
    EXPECT_EQ(Header(r, "RateLimit-Policy"),
              R"("api.burst";q=3;w=3600, "api.daily";q=5;w=86400, "global.all";q=1000;w=3600)");
    EXPECT_EQ(Header(r, "RateLimit"),
              R"("api.burst";r=0;t=3600, "api.daily";r=2;t=86400, "global.all";r=997;t=3600)");
  }
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"denied\"} 10\n"));
  EXPECT_THAT(metrics,
              HasSubstr("floodgate_decisions_total{rule=\"global\",result=\"allowed\"} 3\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"api\",limit=\"burst\","
                                 "result=\"denied\"} 10\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"api\",limit=\"daily\","
                                 "result=\"denied_by_other\"} 10\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"api\",limit=\"daily\","
                                 "result=\"allowed\"} 3\n"));
}

// Every rule that matches applies: the global limit counts all paths, under one key.
TEST_F(MultiServiceTest, EveryMatchingRuleAppliesAndIdentifyNoneSharesOneKey) {
  EXPECT_EQ(Authz("/other", {{"X-Api-Key", "a"}}).result_int(), 204);
  EXPECT_EQ(Authz("/api/1", {{"X-Api-Key", "b"}}).result_int(), 204);
  const Response r = Authz("/elsewhere");
  EXPECT_EQ(r.result_int(), 204);
  EXPECT_EQ(Header(r, "RateLimit"), R"("global.all";r=997;t=3600)");
  EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), "997");
}

TEST_F(MultiServiceTest, AnOverrideGivesANamedClientItsOwnPolicy) {
  const Headers big = {{"X-Api-Key", "big"}};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Authz("/api/x", big).result_int(), 204) << i;
  // Past the ordinary burst of 3; now the (unchanged) daily limit denies.
  const Response r = Authz("/api/x", big);
  EXPECT_EQ(r.result_int(), 429);
  EXPECT_EQ(Body(r)["denied_by"], nlohmann::json::parse(R"(["api.daily"])"));
  EXPECT_THAT(Header(r, "RateLimit-Policy"), HasSubstr(R"("api.burst";q=10;w=3600)"));
  // Another client keeps the default.
  EXPECT_THAT(Header(Authz("/api/x", {{"X-Api-Key", "small"}}), "RateLimit-Policy"),
              HasSubstr(R"("api.burst";q=3;w=3600)"));
}

TEST_F(MultiServiceTest, APlanHeaderChoosesThePolicyThroughTheMap) {
  const auto admitted = [&](const std::string& client, const char* plan) {
    Headers headers = {{"X-Api-Key", client}};
    if (plan != nullptr) headers.emplace_back("X-Plan", plan);
    int n = 0;
    for (int i = 0; i < 20; ++i) n += Authz("/plans/x", headers).result_int() == 204;
    return n;
  };
  EXPECT_EQ(admitted("c-free", "free"), 1);
  EXPECT_EQ(admitted("c-pro", "pro"), 3);
  EXPECT_EQ(admitted("c-none", nullptr), 2);    // the default
  EXPECT_EQ(admitted("c-odd", "platinum"), 2);  // not in the map: the default
}

// A shadow limit is decided and counted but never denies, and clients do not see it.
TEST_F(MultiServiceTest, AShadowLimitNeverDeniesAndCountsEveryWouldDeny) {
  for (int i = 0; i < 5; ++i) {
    const Response r = Authz("/rollout");
    EXPECT_EQ(r.result_int(), 204) << i;
    EXPECT_THAT(Header(r, "RateLimit-Policy"), Not(HasSubstr("rollout.new")));
    EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), std::to_string(4 - i));  // the enforced one
  }
  const Response r = Authz("/rollout");
  EXPECT_EQ(r.result_int(), 429);
  EXPECT_EQ(Body(r)["denied_by"], nlohmann::json::parse(R"(["rollout.old"])"));
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"rollout\",limit=\"new\","
                                 "result=\"allowed\"} 2\n"));
  // Requests 3 to 5 would have been denied; the 6th was denied by the enforced limit
  // and counts as would_deny too (the shadow limit alone would also have denied it).
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"rollout\",limit=\"new\","
                                 "result=\"would_deny\"} 4\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"rollout\",limit=\"old\","
                                 "result=\"allowed\"} 5\n"));
}

class WholeConfigShadowTest : public MultiServiceTest {
 protected:
  WholeConfigShadowTest() : MultiServiceTest(std::string(kConfig) + "shadow: true\n") {}
};

TEST_F(WholeConfigShadowTest, NothingIsDeniedAndNoLimitIsAdvertised) {
  for (int i = 0; i < 8; ++i) {
    const Response r = Authz("/api/x", {{"X-Api-Key", "k"}});
    EXPECT_EQ(r.result_int(), 204) << i;
    EXPECT_EQ(Header(r, "RateLimit-Policy"), "");
    EXPECT_EQ(Header(r, "X-RateLimit-Limit"), "");
  }
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"allowed\"} 8\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"api\",limit=\"burst\","
                                 "result=\"would_deny\"} 5\n"));
  EXPECT_THAT(metrics, HasSubstr("floodgate_limit_decisions_total{rule=\"api\",limit=\"daily\","
                                 "result=\"would_deny\"} 3\n"));
}

TEST_F(MultiServiceTest, CheckItemsDecideSeveralLimitsAllOrNothing) {
  const std::string body =
      R"({"items":[{"key":"u","policy":"sliding_log:2/1h","name":"per-user"},
                   {"key":"org","policy":"sliding_log:3/1h","name":"per-org"}]})";
  for (int i = 0; i < 2; ++i) EXPECT_EQ(Body(Check(body))["allowed"], true);
  Response r = Check(body);
  auto json = Body(r);
  EXPECT_EQ(json["allowed"], false);
  EXPECT_EQ(json["denied_by"], nlohmann::json::parse(R"(["per-user"])"));
  EXPECT_EQ(json["items"][0]["name"], "per-user");
  EXPECT_EQ(json["items"][0]["allowed"], false);
  EXPECT_EQ(json["items"][1]["allowed"], true);
  EXPECT_EQ(json["items"][1]["remaining"], 1);  // the denial spent nothing of per-org
  EXPECT_EQ(Header(r, "RateLimit"), R"("per-user";r=0;t=3600, "per-org";r=1;t=3600)");
  // Another user of the same org gets the org's last unit.
  r = Check(R"({"items":[{"key":"v","policy":"sliding_log:2/1h"},
                         {"key":"org","policy":"sliding_log:3/1h"}]})");
  json = Body(r);
  EXPECT_EQ(json["allowed"], true);
  EXPECT_EQ(json["remaining"], 0);  // the binding item: the org
  EXPECT_EQ(json["items"][1]["name"], "items[1]");
  // A rule in the items brings all its limits, keyed as {"key", "rule"} keys them.
  json = Body(Check(R"({"items":[{"key":"k","rule":"api"}]})"));
  EXPECT_EQ(json["items"].size(), 2u);
  EXPECT_EQ(json["items"][1]["name"], "api.daily");
  EXPECT_EQ(json["remaining"], 2);
}

struct BadItems {
  const char* body;
  int status;
  const char* message;
};
class CheckItemsReject : public MultiServiceTest, public ::testing::WithParamInterface<BadItems> {};
TEST_P(CheckItemsReject, WithTheRightStatusAndMessage) {
  const Response r = Check(GetParam().body);
  EXPECT_EQ(r.result_int(), GetParam().status) << GetParam().body;
  EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr(GetParam().message));
  EXPECT_EQ(store_->Stats().keys, 0u);  // nothing was decided
}
std::string SeventeenItems() {
  std::string body = R"({"items":[)";
  for (int i = 0; i < 17; ++i) {
    body += (i ? "," : "") + std::string(R"({"key":"k)") + std::to_string(i) +
            R"(","policy":"gcra:1/1s"})";
  }
  return body + "]}";
}
const std::string kSeventeen = SeventeenItems();
INSTANTIATE_TEST_SUITE_P(
    Table, CheckItemsReject,
    ::testing::Values(
        BadItems{R"({"items":[]})", 400, "\"items\" must hold 1 to 16 limits, got 0"},
        BadItems{kSeventeen.c_str(), 400, "\"items\" must hold 1 to 16 limits, got 17"},
        BadItems{R"({"items":[{"key":"k","policy":"gcra:1/1s"}],"key":"k"})", 400,
                 "give \"items\" alone"},
        BadItems{R"({"items":[7]})", 400, "items[0] must be a JSON object"},
        BadItems{R"({"items":[{"key":"k","policy":"gcra:1/1s","colour":"red"}]})", 400,
                 "items[0]: unknown field \"colour\""},
        BadItems{R"({"items":[{"key":"k","policy":"gcra:1/1s"},{"key":"k","rule":"nope"}]})", 404,
                 "items[1]: unknown rule \"nope\""},
        BadItems{R"({"items":[{"key":"k"}]})", 400, "items[0]: give exactly one"},
        BadItems{R"({"items":[{"key":"","policy":"gcra:1/1s"}]})", 400, "items[0]: \"key\""},
        BadItems{R"({"items":[{"key":"k","policy":"gcra:0/1s"}]})", 400, "items[0]: "},
        BadItems{R"({"items":[{"key":"k","policy":"gcra:1/1s","cost":-2}]})", 400,
                 "items[0]: \"cost\""},
        // Two items on one key under one algorithm would share their state.
        BadItems{R"({"items":[{"key":"k","policy":"gcra:1/1s"},{"key":"k","policy":"gcra:5/1m"}]})",
                 400, "items[0] and items[1] share key \"k\" under gcra"}));

// docs/leases.md, "Behind nginx or Envoy": /v1/authz takes a lease with the rate and
// hands its id back in X-RateLimit-Lease; the release hook (POST /v1/release with the ids
// in that header, no body) frees it. A denied request holds no lease and spends no rate.
TEST_F(MultiServiceTest, AuthzTakesALeaseThatTheReleaseHookFrees) {
  const Headers key = {{"X-Api-Key", "k1"}};
  std::vector<std::string> leases;
  for (int i = 0; i < 2; ++i) {
    const Response r = Authz("/exports/1", key);
    ASSERT_EQ(r.result_int(), 204) << r.body;
    leases.push_back(Header(r, "X-RateLimit-Lease"));
    EXPECT_EQ(leases.back().size(), 16u) << leases.back();
  }
  EXPECT_NE(leases[0], leases[1]);
  Response r = Authz("/exports/1", key);
  EXPECT_EQ(r.result_int(), 429);
  EXPECT_EQ(r.body,
            R"({"status": 429, "code": "rate_limit:exceeded", "denied_by": ["exports.running"]})");
  EXPECT_EQ(Header(r, "X-RateLimit-Lease"), "");
  const auto hook = [&](const std::string& ids) {
    return Call(http::verb::post, "/v1/release", "", {{"X-RateLimit-Lease", ids}});
  };
  r = hook(leases[0]);
  EXPECT_EQ(r.result_int(), 204) << r.body;
  r = hook(leases[0]);
  EXPECT_EQ(r.result_int(), 404) << "released already: " << r.body;
  r = Authz("/exports/1", key);
  ASSERT_EQ(r.result_int(), 204) << r.body;
  leases.push_back(Header(r, "X-RateLimit-Lease"));
  // Three admitted: the denied request spent none of the rate.
  EXPECT_THAT(Header(r, "RateLimit"), HasSubstr(R"("exports.rate";r=97;)"));
  EXPECT_THAT(Header(r, "RateLimit"), HasSubstr(R"("exports.running";r=0;)"));
  // Several at once, comma-separated, as one proxy variable carries them.
  r = hook(leases[1] + ", " + leases[2]);
  EXPECT_EQ(r.result_int(), 204) << r.body;
  r = Authz("/exports/1", key);
  EXPECT_EQ(r.result_int(), 204);
  EXPECT_THAT(Header(r, "RateLimit"), HasSubstr(R"("exports.running";r=1;)"));
  r = Call(http::verb::post, "/v1/release", "");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_THAT(std::string(Body(r)["message"]), HasSubstr("X-RateLimit-Lease"));
}

// /v1/check with "items" takes a concurrency limit's lease too, and names it on its item.
TEST_F(MultiServiceTest, CheckItemsTakeLeasesAndNameThem) {
  Response r = Check(R"({"items":[{"key":"k2","rule":"exports"}]})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  const nlohmann::json body = Body(r);
  ASSERT_TRUE(body["items"][1]["lease"].is_string()) << r.body;
  EXPECT_EQ(body["items"][1]["lease_us"], 3'600'000'000LL);
  EXPECT_FALSE(body["items"][0].contains("lease"));
  EXPECT_EQ(Header(r, "X-RateLimit-Lease"), body["items"][1]["lease"]);
  r = Call(http::verb::post, "/v1/release",
           nlohmann::json{{"lease", body["items"][1]["lease"]}}.dump());
  EXPECT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["remaining"], 2);
  r = Check(R"({"items":[{"key":"k2","policy":"concurrency:2","cost":2}]})");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_THAT(std::string(Body(r)["message"]), HasSubstr("takes one lease per item"));
}

// cost_from_response (docs/reservations.md, "Behind a proxy"): /v1/authz reserves the
// rule's cost as the estimate and names the reservation in X-RateLimit-Reservation; the
// settle hook (POST /v1/settle, no body) charges the actual the proxy reports.
TEST_F(MultiServiceTest, CostFromResponseReservesTheEstimateAndTheHookSettlesTheActual) {
  const Headers key = {{"X-Api-Key", "k1"}};
  Response r = Authz("/llm/complete", key);
  ASSERT_EQ(r.result_int(), 204) << r.body;
  const std::string reservation = Header(r, "X-RateLimit-Reservation");
  EXPECT_EQ(reservation.size(), 16u) << reservation;
  EXPECT_EQ(Header(r, "X-RateLimit-Lease"), "");
  EXPECT_THAT(Header(r, "RateLimit"), HasSubstr(R"("llm";r=15;)"));  // the estimate, 5
  const auto hook = [&](Headers headers) {
    return Call(http::verb::post, "/v1/settle", "", headers);
  };
  r = hook({{"X-RateLimit-Reservation", reservation}});
  EXPECT_EQ(r.result_int(), 400) << "no actual";
  EXPECT_THAT(std::string(Body(r)["message"]), HasSubstr("X-RateLimit-Actual must be"));
  r = hook({{"X-RateLimit-Reservation", reservation}, {"X-RateLimit-Actual", "2"}});
  EXPECT_EQ(r.result_int(), 204) << r.body;
  r = hook({{"X-RateLimit-Reservation", reservation}, {"X-RateLimit-Actual", "2"}});
  EXPECT_EQ(r.result_int(), 404) << "settled already: " << r.body;
  // 2 spent, then the next estimate: 20 - 2 - 5.
  r = Authz("/llm/complete", key);
  ASSERT_EQ(r.result_int(), 204) << r.body;
  EXPECT_THAT(Header(r, "RateLimit"), HasSubstr(R"("llm";r=13;)"));
  // /v1/check "items" reserve with a hold of their own, named on the item.
  r = Check(R"({"items":[{"key":"k9","policy":"sliding_log:20/1h","cost":4,"hold_ms":60000}]})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["items"][0]["hold_us"], 60'000'000);
  EXPECT_EQ(Header(r, "X-RateLimit-Reservation"), Body(r)["items"][0]["reservation"]);
}

}  // namespace
}  // namespace floodgate::server
