// Which limits and keys a request meets, tested without a store: keys, identities, shapes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/config.h"
#include "server/request_limits.h"

namespace floodgate::server {
namespace {

namespace ip = boost::asio::ip;

constexpr const char* kRules = R"(
rules:
  - name: login
    match: {path_prefix: /login}
    identify: ip
    policy: sliding_log:3/15m
  - name: api
    match: {path_prefix: /api}
    identify: ip+header:X-Api-Key
    limits:
      - name: burst
        policy: gcra:10/1s
        overrides: {'1.2.3.4+big': 'gcra:100/1s'}
      - name: daily
        policy: fixed_window:1000/1d
        shadow: true
        policy_from: {header: X-Plan, map: {pro: 'fixed_window:5000/1d'}}
  - name: web
    match: {path_prefix: /web}
    identify: cookie:fgid
    policy: gcra:5/1s
  - name: everyone
    match: {path_prefix: /}
    identify: none
    cost: 3
    cost_from_response: true
    hold: 2s
    policy: gcra:50/1s
)";

class RequestLimitsTest : public ::testing::Test {
 protected:
  RequestLimitsTest() : config_(*ParseConfig(kRules, "t.yaml")) {}
  const Rule& rule(std::string_view name) const { return *config_.Find(name); }
  static Request Get(std::vector<std::pair<std::string, std::string>> headers = {}) {
    Request request(http::verb::get, "/", 11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    return request;
  }
  ServerConfig config_;
  const ip::address client_ = ip::make_address("1.2.3.4");
};

TEST_F(RequestLimitsTest, ARuleKeysEachLimitByTheClientInAHashTag) {
  RequestLimits limits;
  const Request request = Get({{"X-Plan", "pro"}});
  AddRuleLimits(rule("api"), "ip=1.2.3.4|h=k", '|', "1.2.3.4+big", 2, request, config_, limits);
  limits.Seal();
  ASSERT_EQ(limits.items.size(), 2u);
  EXPECT_EQ(limits.items[0].key, "api.burst|{ip=1.2.3.4|h=k}");
  EXPECT_EQ(limits.items[1].key, "api.daily|{ip=1.2.3.4|h=k}");
  EXPECT_EQ(limits.items[0].name, "api.burst");
  EXPECT_EQ(limits.rule_lengths[0], 3u);
  // The override of the named client, the plan of the header.
  EXPECT_EQ(limits.items[0].policy, *Policy::Parse("gcra:100/1s"));
  EXPECT_EQ(limits.items[1].policy, *Policy::Parse("fixed_window:5000/1d"));
  EXPECT_FALSE(limits.items[0].shadow);
  EXPECT_TRUE(limits.items[1].shadow);
  EXPECT_EQ(limits.items[0].cost, 2);
  EXPECT_FALSE(limits.single());
}

TEST_F(RequestLimitsTest, OneEnforcedLimitHoldingNothingIsASingleDecision) {
  RequestLimits limits;
  AddRuleLimits(rule("login"), "k", ':', "", 1, Get(), config_, limits);
  limits.Seal();
  EXPECT_EQ(limits.items[0].key, "login:{k}");
  EXPECT_TRUE(limits.single());
  limits.shape = RequestLimits::Shape::kItemized;  // "items": item by item, even for one
  EXPECT_FALSE(limits.single());
  RequestLimits held;
  AddRuleLimits(rule("login"), "k", ':', "", 1, Get(), config_, held, std::chrono::seconds(1));
  EXPECT_FALSE(held.single());
  held.shape = RequestLimits::Shape::kOne;  // an inline policy: one decision, holding nothing
  EXPECT_TRUE(held.single());
}

TEST_F(RequestLimitsTest, OverLongKeysAreCut) {
  RequestLimits limits;
  AddRuleLimits(rule("login"), std::string(600, 'k'), ':', "", 1, Get(), config_, limits);
  EXPECT_EQ(limits.keys[0].size(), kMaxKeyBytes);
}

TEST_F(RequestLimitsTest, IdentitiesNameTheClient) {
  std::string cookie;
  EXPECT_EQ(Identify(rule("login"), Get(), client_, cookie),
            (std::pair<std::string, std::string>{"ip=1.2.3.4", "1.2.3.4"}));
  EXPECT_EQ(Identify(rule("api"), Get({{"X-Api-Key", "big"}}), client_, cookie),
            (std::pair<std::string, std::string>{"ip=1.2.3.4|h=big", "1.2.3.4+big"}));
  // A missing header falls back to the IP.
  EXPECT_EQ(Identify(rule("api"), Get(), client_, cookie).first, "ip=1.2.3.4|ip=1.2.3.4");
  EXPECT_EQ(Identify(rule("everyone"), Get(), client_, cookie),
            (std::pair<std::string, std::string>{"*", "*"}));
  EXPECT_TRUE(cookie.empty());
}

TEST_F(RequestLimitsTest, ACookieWeIssuedIdentifiesElseTheIpAndANewCookie) {
  const std::string id = NewUuidV7();
  ASSERT_TRUE(LooksLikeUuid(id));
  std::string cookie;
  EXPECT_EQ(Identify(rule("web"), Get({{"Cookie", "a=b; fgid=" + id}}), client_, cookie).first,
            "c=" + id);
  EXPECT_TRUE(cookie.empty());
  // A forged value cannot smuggle bytes into keys: the IP, and a new cookie to set.
  EXPECT_EQ(Identify(rule("web"), Get({{"Cookie", "fgid=}{x"}}), client_, cookie).first,
            "ip=1.2.3.4");
  EXPECT_THAT(cookie, ::testing::StartsWith("fgid="));
  EXPECT_THAT(cookie, ::testing::HasSubstr("; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax"));
}

TEST_F(RequestLimitsTest, AuthzMeetsEveryMatchedRuleReservingWhenCostComesFromTheResponse) {
  RequestLimits limits;
  AddAuthzLimits(config_.MatchAll("GET", "/login"), Get(), client_, config_, limits);
  limits.Seal();
  ASSERT_EQ(limits.items.size(), 2u);
  EXPECT_EQ(limits.rules, (std::vector<std::string>{"login", "everyone"}));
  EXPECT_EQ(limits.items[0].key, "login|{ip=1.2.3.4}");
  EXPECT_EQ(limits.items[1].key, "everyone|{*}");
  EXPECT_EQ(limits.items[1].cost, 3);
  EXPECT_EQ(HoldOf(limits.items[0]).count(), 0);
  EXPECT_EQ(HoldOf(limits.items[1]), std::chrono::seconds(2));
}

}  // namespace
}  // namespace floodgate::server
