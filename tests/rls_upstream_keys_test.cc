// Upstream's newer config keys and switches: quota_mode, metadata, share_threshold,
// value_to_metric, wildcards anywhere in a value, MERGE_DOMAIN_CONFIG, QUOTA_MODE,
// RESPONSE_DYNAMIC_METADATA; and the gRPC client-name check (GRPC_CLIENT_TLS_SAN).
//
// Each as envoyproxy/ratelimit's config_impl.go and service/ratelimit.go do it at f2fb15770f7f
// (their tests' cases where they have them): loaded by the config, answered by the engine on
// memory://.

#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rls_request.h"
#include "server/rls/config.h"
#include "server/rls/grpc_tls.h"
#include "server/rls/rls_engine.h"

namespace floodgate::server::rls {
namespace {

using ::testing::HasSubstr;
using RlsResponse = pb::RateLimitResponse;
using Descriptor = ::floodgate::testing::RlsDescriptor;
using ::floodgate::testing::RlsRequest;
namespace ext = ::envoy::extensions::common::ratelimit::v3;

constexpr TimePoint kNow{std::chrono::microseconds(1'767'225'600'250'000)};

absl::StatusOr<std::shared_ptr<const RlsConfig>> Parse(const std::string& yaml) {
  return ParseRlsConfig({{"a.yaml", yaml}});
}

ext::RateLimitDescriptor Entries(std::vector<std::pair<std::string, std::string>> entries) {
  return RlsRequest("d", {Descriptor{std::move(entries)}}).descriptors(0);
}

// A message as JSON, compared as JSON (a Struct's fields come in no fixed order).
nlohmann::json Json(const google::protobuf::Message& message) {
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(message, &out).ok());
  return nlohmann::json::parse(out);
}

// --- the config ---

TEST(RlsUpstreamKeys, CurrentUpstreamKeysLoad) {
  auto config = Parse(R"(domain: d
descriptors:
  - key: k
    value: v
    quota_mode: true
    shadow_mode: false
    value_to_metric: true
    metadata: {team: payments}
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const RlsLimit* limit = (*config)->Find("d", Entries({{"k", "v"}}));
  ASSERT_NE(limit, nullptr);
  EXPECT_TRUE(limit->quota);
  EXPECT_EQ((*config)->Dump(),
            "d.k_v: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: true\n"
            "d.path_/files/*: unit=MINUTE requests_per_unit=2, shadow_mode: false, "
            "quota_mode: false\n");
}

TEST(RlsUpstreamKeys, ShareThresholdNeedsAWildcard) {
  auto config = Parse(R"(domain: d
descriptors:
  - key: k
    value: v
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
)");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "a.yaml:5: share_threshold can only be used with wildcard values (containing '*'), "
            "but found key 'k_v'");
}

// Metadata's keys are the user's: not checked against the config's keys.
TEST(RlsUpstreamKeys, MetadataKeysAreNotConfigKeys) {
  EXPECT_TRUE(Parse("domain: d\ndescriptors:\n  - key: k\n    metadata: {descriptors: [1, 2], "
                    "anything: {unit: x}}\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
                  .ok());
  auto scalar = Parse("domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n");
  ASSERT_FALSE(scalar.ok());
  EXPECT_THAT(scalar.status().message(), HasSubstr("a.yaml:4: error parsing metadata"));
  // Past the nesting bound (protobuf parsers refuse messages nested past 100 levels).
  std::string deep = "domain: d\ndescriptors:\n  - key: k\n    metadata: ";
  for (int i = 0; i < 40; ++i) deep += "{a: ";
  deep += "1";
  for (int i = 0; i < 40; ++i) deep += "}";
  auto too_deep = Parse(deep + "\n");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("nested deeper than 32 levels"));
}

// Upstream's config_impl_test cases for wildcards anywhere in a value, first match in file order.
TEST(RlsUpstreamKeys, WildcardsAnywhereInAValue) {
  auto config = Parse(R"(domain: d
descriptors:
  - key: path
    value: /api/*/users/*
    rate_limit: {unit: second, requests_per_unit: 1, name: users}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 2, name: api}
  - key: path
    value: "*.json"
    rate_limit: {unit: second, requests_per_unit: 3, name: json}
  - key: path
    value: a*b*c
    rate_limit: {unit: second, requests_per_unit: 4, name: abc}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5, name: default}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const auto name = [&](const std::string& value) {
    const RlsLimit* limit = (*config)->Find("d", Entries({{"path", value}}));
    return limit == nullptr ? std::string("none") : limit->name;
  };
  EXPECT_EQ(name("/api/v1/users/42"), "users");
  EXPECT_EQ(name("/api/v1/users/"), "users");  // '*' matches nothing too
  EXPECT_EQ(name("/api/v1/orders"), "api");
  EXPECT_EQ(name("/static/x.json"), "json");
  EXPECT_EQ(name("abc"), "abc");
  EXPECT_EQ(name("a-b-b-c"), "abc");
  EXPECT_EQ(name("ab"), "default");   // 'c' missing
  EXPECT_EQ(name("acb"), "default");  // in order only
  EXPECT_EQ(name("/index.html"), "default");
}

TEST(RlsUpstreamKeys, WildcardMatchesAsUpstreams) {
  const auto matches = [](std::string pattern, std::string value) {
    Wildcard wildcard{pattern, {}};
    for (std::size_t at = 0;;) {
      const std::size_t star = pattern.find('*', at);
      wildcard.parts.push_back(pattern.substr(at, star - at));
      if (star == std::string::npos) break;
      at = star + 1;
    }
    return wildcard.Matches(value);
  };
  EXPECT_TRUE(matches("k_a*", "k_a"));
  EXPECT_TRUE(matches("k_*a*a", "k_aa"));
  EXPECT_FALSE(matches("k_*a*a", "k_a"));  // the fixed parts overlap: too short
  EXPECT_TRUE(matches("k_**", "k_"));
  EXPECT_FALSE(matches("k_x*", "k_y"));
}

TEST(RlsUpstreamKeys, MergeDomainConfigJoinsFiles) {
  const std::vector<ConfigFile> files = {
      {"one.yaml",
       "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
       "requests_per_unit: 1}\n"},
      {"two.yaml",
       "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, "
       "requests_per_unit: 2}\n"}};
  auto separate = ParseRlsConfig(files);
  ASSERT_FALSE(separate.ok());
  EXPECT_EQ(separate.status().message(), "two.yaml:1: duplicate domain 'd' in config file");

  auto merged = ParseRlsConfig(files, DomainFiles::kMerged);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ((*merged)->domain_count(), 1u);
  ASSERT_NE((*merged)->Find("d", Entries({{"a", ""}})), nullptr);
  ASSERT_NE((*merged)->Find("d", Entries({{"b", ""}})), nullptr);
  EXPECT_EQ((*merged)->Find("d", Entries({{"b", ""}}))->requests_per_unit, 2u);

  // A composite key in both files is a duplicate, as upstream's loadDescriptors finds it.
  auto twice = ParseRlsConfig({files[0], {"three.yaml", files[0].text}}, DomainFiles::kMerged);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "three.yaml:3: duplicate descriptor composite key 'd.a'");
}

TEST(RlsUpstreamKeys, MetadataAsYamlV2DecodesIt) {
  auto config = Parse(R"(domain: d
descriptors:
  - key: k
    metadata:
      text: hello
      quoted: "123"
      number: 12
      hex: 0x10
      real: 1.5
      flag: yes
      nothing: ~
      list: [1, two]
      nested: {1: one, true: yes}
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const RlsMatch match = (*config)->Match("d", Entries({{"k", "x"}}));
  ASSERT_NE(match.metadata, nullptr);
  EXPECT_EQ(Json(*match.metadata),
            nlohmann::json::parse(
                R"({"flag":true,"hex":16,"list":[1,"two"],"nested":{"1":"one","true":true},)"
                R"("nothing":null,"number":12,"quoted":"123","real":1.5,"text":"hello"})"));
}

// value_to_metric only names stats (the stats' work); upstream drops the metadata where it
// builds the limit anew for such a name.
TEST(RlsUpstreamKeys, ValueToMetricKeyIsCarried) {
  auto config = Parse(R"(domain: d
descriptors:
  - key: route
    value_to_metric: true
    metadata: {m: 1}
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: exact
    value: v
    value_to_metric: true
    metadata: {m: 2}
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const RlsMatch by_default = (*config)->Match("d", Entries({{"route", "r1"}}));
  EXPECT_EQ(by_default.value_to_metric_key, "d.route_r1");
  EXPECT_EQ(by_default.metadata, nullptr);
  const RlsMatch exact = (*config)->Match("d", Entries({{"exact", "v"}}));
  EXPECT_EQ(exact.value_to_metric_key, "") << "the config's own key";
  EXPECT_NE(exact.metadata, nullptr);
}

// --- the engine ---

class RlsUpstreamAnswers : public ::testing::Test {
 protected:
  void Start(const std::string& yaml, RlsSettings settings = {}) {
    auto config = Parse(yaml);
    ASSERT_TRUE(config.ok()) << config.status();
    engine_ = std::make_unique<RlsEngine>(store_, std::move(settings), *config, metrics_,
                                          [] { return std::optional<TimePoint>(kNow); });
  }
  RlsResponse Ask(const pb::RateLimitRequest& request) {
    RlsResponse response;
    std::optional<absl::Status> result;
    engine_->ShouldRateLimit(request, &response, [&](absl::Status s) { result = s; });
    EXPECT_TRUE(result.has_value() && result->ok());
    return response;
  }

  MemoryStore store_;
  RlsMetrics metrics_;
  std::unique_ptr<RlsEngine> engine_;
};

constexpr const char* kQuota = R"(domain: d
descriptors:
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
)";

// Upstream's ratelimit_test quota cases: a quota descriptor over the limit keeps its code but
// answers OK overall while another quota descriptor passes; all quota descriptors over is
// OVER_LIMIT; a plain descriptor over is OVER_LIMIT whatever the quotas say.
TEST_F(RlsUpstreamAnswers, QuotaModeDescriptors) {
  Start(kQuota);
  const auto request =
      RlsRequest("d", {Descriptor{{{"quota", "a"}}}, Descriptor{{{"quota2", "a"}}}});
  EXPECT_EQ(Ask(request).overall_code(), RlsResponse::OK);
  const RlsResponse second = Ask(request);
  EXPECT_EQ(second.statuses(0).code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(second.statuses(1).code(), RlsResponse::OK);
  EXPECT_EQ(second.overall_code(), RlsResponse::OK) << "one quota descriptor still passes";

  const auto alone = RlsRequest("d", {Descriptor{{{"quota", "a"}}}});
  EXPECT_EQ(Ask(alone).overall_code(), RlsResponse::OVER_LIMIT) << "every quota descriptor over";

  const auto mixed = RlsRequest("d", {Descriptor{{{"plain", "p"}}}, Descriptor{{{"quota2", "b"}}}});
  EXPECT_EQ(Ask(mixed).overall_code(), RlsResponse::OK);
  EXPECT_EQ(Ask(mixed).overall_code(), RlsResponse::OVER_LIMIT) << "a plain descriptor over";
}

// QUOTA_MODE: every descriptor is a quota one, those without a limit too.
TEST_F(RlsUpstreamAnswers, GlobalQuotaMode) {
  Start(kQuota, {.global_quota = true});
  const auto request =
      RlsRequest("d", {Descriptor{{{"plain", "p"}}}, Descriptor{{{"nomatch", "x"}}}});
  EXPECT_EQ(Ask(request).overall_code(), RlsResponse::OK);
  const RlsResponse over = Ask(request);
  EXPECT_EQ(over.statuses(0).code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(over.overall_code(), RlsResponse::OK) << "the descriptor without a limit passes";
  const auto alone = RlsRequest("d", {Descriptor{{{"plain", "p"}}}});
  EXPECT_EQ(Ask(alone).overall_code(), RlsResponse::OVER_LIMIT);
}

// RESPONSE_DYNAMIC_METADATA: the request and the metadata of the limits that passed, merged
// (a field both give stays the first's; nested mappings merge).
TEST_F(RlsUpstreamAnswers, DynamicMetadata) {
  Start(R"(domain: d
descriptors:
  - key: a
    metadata: {team: payments, tags: {tier: gold}}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: b
    metadata: {team: other, tags: {region: eu}}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: c
    metadata: {denied: true}
    rate_limit: {unit: minute, requests_per_unit: 0}
)",
        {.dynamic_metadata = true});
  Descriptor with_hits{{{"b", "2"}}, 3};
  const RlsResponse response = Ask(RlsRequest(
      "d", {Descriptor{{{"a", "1"}}}, with_hits, Descriptor{{{"c", "3"}}}}, /*hits_addend=*/0));
  EXPECT_EQ(Json(response.dynamic_metadata()),
            nlohmann::json::parse(
                R"({"descriptors":[{"entries":["a=1"]},{"entries":["b=2"],"hitsAddend":3},)"
                R"({"entries":["c=3"]}],"domain":"d","metadata":{"tags":{"region":"eu","tier":)"
                R"("gold"},"team":"payments"}})"));
  Start("domain: d\n");  // off: no metadata
  EXPECT_FALSE(Ask(RlsRequest("d", {Descriptor{{{"a", "1"}}}})).has_dynamic_metadata());
}

// share_threshold: every value the wildcard matches spends one counter; without it each value
// counts alone.
TEST_F(RlsUpstreamAnswers, ShareThresholdSharesOneCounter) {
  Start(R"(domain: d
descriptors:
  - key: files
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: own
    value: /own/*
    rate_limit: {unit: minute, requests_per_unit: 2}
)");
  const auto ask = [&](const std::string& key, const std::string& value) {
    return Ask(RlsRequest("d", {Descriptor{{{key, value}}}})).overall_code();
  };
  EXPECT_EQ(ask("files", "/files/a"), RlsResponse::OK);
  EXPECT_EQ(ask("files", "/files/b"), RlsResponse::OK);
  EXPECT_EQ(ask("files", "/files/c"), RlsResponse::OVER_LIMIT) << "one counter for the wildcard";
  EXPECT_EQ(ask("own", "/own/a"), RlsResponse::OK);
  EXPECT_EQ(ask("own", "/own/b"), RlsResponse::OK);
  EXPECT_EQ(ask("own", "/own/c"), RlsResponse::OK) << "a counter per value";
}

// --- GRPC_CLIENT_TLS_SAN, as Go's VerifyHostname ---

TEST(RlsUpstreamKeys, ClientSanAsGoMatchesIt) {
  EXPECT_TRUE(SanMatches("envoy.example.com", {"envoy.example.com"}, {}));
  EXPECT_TRUE(SanMatches("Envoy.Example.com.", {"envoy.example.com"}, {}));
  EXPECT_TRUE(SanMatches("envoy.example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(SanMatches("a.envoy.example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(SanMatches("example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(SanMatches("other.example.com", {"envoy.example.com"}, {}));
  EXPECT_TRUE(SanMatches("127.0.0.1", {}, {"127.0.0.1"}));
  EXPECT_FALSE(SanMatches("127.0.0.1", {"127.0.0.1"}, {}));  // an IP needs an IP SAN
  EXPECT_TRUE(SanMatches("::1", {}, {"0:0:0:0:0:0:0:1"}));
}

}  // namespace
}  // namespace floodgate::server::rls
