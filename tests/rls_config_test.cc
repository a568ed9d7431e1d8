// envoyproxy/ratelimit's configuration as floodgate reads it: upstream's errors and matching.
//
// Errors as upstream words them (text, file, line); matching as upstream's GetLimit.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "alias_bomb.h"
#include "rls_request.h"
#include "server/rls/config.h"
#include "server/yaml_budget.h"

namespace floodgate::server::rls {
namespace {

using ::testing::HasSubstr;
namespace ext = ::envoy::extensions::common::ratelimit::v3;
using RateLimit = ::envoy::service::ratelimit::v3::RateLimitResponse::RateLimit;

absl::StatusOr<std::shared_ptr<const RlsConfig>> Parse(const std::string& yaml,
                                                       const std::string& name = "a.yaml") {
  return ParseRlsConfig({{name, yaml}});
}

std::string ErrorOf(const std::string& yaml) {
  auto config = Parse(yaml);
  EXPECT_FALSE(config.ok()) << yaml;
  return config.ok() ? "" : std::string(config.status().message());
}

using floodgate::testing::Descriptor;

struct ErrorCase {
  std::string yaml;
  std::string expected;  // the whole message: file, line, upstream's text
};

class ConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConfigErrorTest, UpstreamTextWithFileAndLine) {
  EXPECT_EQ(ErrorOf(GetParam().yaml), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, ConfigErrorTest,
    ::testing::Values(
        ErrorCase{"descriptors: []\n", "a.yaml:1: config file cannot have empty domain"},
        ErrorCase{"domain: \"\"\n", "a.yaml:1: config file cannot have empty domain"},
        ErrorCase{"domain: d\ndescriptors:\n  - value: x\n", "a.yaml:3: descriptor has empty key"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
                  "a.yaml:5: duplicate descriptor composite key 'd.k_v'"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n"
                  "      - key: b\n",
                  "a.yaml:6: duplicate descriptor composite key 'd.a.b'"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: seconds\n"
                  "      requests_per_unit: 1\n",
                  "a.yaml:5: invalid rate limit unit 'seconds'"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: unknown\n"
                  "      requests_per_unit: 1\n",
                  "a.yaml:5: invalid rate limit unit 'unknown'"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n"
                  "      unit: second\n",
                  "a.yaml:6: should not specify rate limit unit when unlimited"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: second\n",
                  "a.yaml:4: config error, unknown key 'ratelimit'"},
        ErrorCase{
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
            "      requests_per_unit: 1\n      name: n\n      replaces:\n        - name: \"\"\n",
            "a.yaml:9: should not have an empty replaces entry"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: 1\n      name: n\n      replaces:\n        - name: n\n",
                  "a.yaml:9: replaces should not contain name of same descriptor"},
        ErrorCase{"domain: d\ndescriptors:\n  - k\n",
                  "a.yaml:3: config error, yaml file contains list of type other than map: k"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: many\n",
                  "a.yaml:6: error loading config file: requests_per_unit must be a whole "
                  "number from 0 to 4294967295"},
        ErrorCase{"domain: [d\n",
                  "a.yaml:2: error loading config file: end of sequence flow not found"},
        // floodgate refuses a key given twice (upstream's YAML decoding keeps the last, yaml-cpp
        // the first), and an alias inside its own anchor (yaml-cpp builds a loop).
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: 1\n      unit: hour\n",
                  "a.yaml:7: key \"unit\" given twice in one mapping (first on line 5)"},
        ErrorCase{"domain: d\ndescriptors: []\ndomain: e\n",
                  "a.yaml:3: key \"domain\" given twice in one mapping (first on line 1)"},
        ErrorCase{"domain: d\ndescriptors: &a\n  - key: k\n    descriptors: *a\n",
                  "a.yaml:4: alias *a is inside the node its anchor names: a loop"},
        // Envoy cannot hold a request: floodgate's delay= has no place in RLS (issue 38).
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: 5\n      algorithm: gcra\n      delay: 1s\n",
                  "a.yaml:8: config error, delay is not for Envoy's rate limit service: Envoy "
                  "cannot hold a request for its slot; use /v1/authz or /v1/check for delay="},
        // floodgate's extensions get floodgate's own messages, with the line.
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: 5\n      algorithm: leaky\n",
                  "a.yaml:5: rate_limit: invalid policy \"leaky:5/1s\": unknown algorithm "
                  "\"leaky\" (gcra, token_bucket, sliding_log, sliding_window, fixed_window, "
                  "concurrency)"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      requests_per_unit: 5\n      burst: 10\n",
                  "a.yaml:5: rate_limit: invalid policy \"fixed_window:5/1s,burst=10\": burst "
                  "is only for gcra and token_bucket, not fixed_window"},
        ErrorCase{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                  "      period: 30s\n      requests_per_unit: 5\n",
                  "a.yaml:5: rate_limit gives both unit and period"},
        ErrorCase{
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      period: 30 parsecs\n"
            "      requests_per_unit: 5\n",
            "a.yaml:5: period: \"30 parsecs\" needs a unit: us, ms, s, m, h or d (e.g. 10s)"}));

// Aliases ten wide: four deep (117,775 nodes) loads, five deep (10^5 descriptors, 1.2
// million nodes) is refused by its count before the key check or the loader walks it; seven
// deep (10^7) took 30 s and 1.3 GB.
TEST(RlsConfigTest, AliasesAreCountedAsTheNodesTheyRepeat) {
  auto four = Parse(testing::AliasBomb(10, 4));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ((*four)
                ->Find("bomb", Descriptor({{"k3", "v9"}, {"k2", "v9"}, {"k1", "v9"}, {"k0", "v9"}}))
                ->requests_per_unit,
            1u);
  for (const int depth : {5, 7}) {
    auto refused = Parse(testing::AliasBomb(10, depth));
    ASSERT_FALSE(refused.ok()) << depth;
    EXPECT_EQ(refused.status().message(),
              "a.yaml:2: more than 1000000 YAML nodes in one config once aliases are expanded: "
              "*L3 repeats 117771 (docs/security.md)");
  }
}

// The bound is the directory's, all files together: a file two nodes within the bound is
// refused after a file of three (`domain: one`: a map, a key, a value). The refused file is
// counted from the parser's events and never built, so the test costs little at the bound
// (three files of 393,213 nodes, two of them loaded, took 104 s under TSan).
TEST(RlsConfigTest, TheFilesOfADirectoryShareTheNodeBound) {
  // An alias bomb padded to kMaxYamlNodes - 2 under a known key: a list holding a list of
  // 1,000 scalars (&P), aliases of it and single scalars (an alias counts as the nodes it
  // repeats, and costs the parser little).
  std::string big = testing::AliasBomb(8, 5, "two");
  YamlBudget bomb_alone;
  ASSERT_TRUE(bomb_alone.Charge(big, "two.yaml").ok());
  const std::uint64_t padding = kMaxYamlNodes - 2 - bomb_alone.used() - 2;  // key, outer list
  const std::uint64_t lists = padding / 1001, scalars = padding % 1001;     // a list: 1 + 1000
  big += "value: [&P [0";
  for (int i = 1; i < 1000; ++i) big += ",0";
  big += "]";
  for (std::uint64_t i = 1; i < lists; ++i) big += ",*P";
  for (std::uint64_t i = 0; i < scalars; ++i) big += ",0";
  big += "]\n";
  YamlBudget big_alone;
  ASSERT_TRUE(big_alone.Charge(big, "two.yaml").ok());
  ASSERT_EQ(big_alone.used(), kMaxYamlNodes - 2);

  auto both = ParseRlsConfig({{"one.yaml", "domain: one\n"}, {"two.yaml", big}});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(std::string(both.status().message()),
              ::testing::StartsWith("two.yaml:3: more than 1000000 YAML nodes in one config"));
}

TEST(RlsConfigTest, DuplicateDomainAcrossFilesNamesTheSecondFile) {
  auto config = ParseRlsConfig({{"one.yaml", "domain: d\n"}, {"two.yaml", "\n\ndomain: d\n"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "two.yaml:3: duplicate domain 'd' in config file");
}

TEST(RlsConfigTest, UnitsAndDefaultPolicy) {
  auto config = Parse(
      "domain: d\n"
      "descriptors:\n"
      "  - key: s\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
      "  - key: m\n    rate_limit: {unit: Minute, requests_per_unit: 2}\n"
      "  - key: w\n    rate_limit: {unit: WEEK, requests_per_unit: 3}\n"
      "  - key: mo\n    rate_limit: {unit: month, requests_per_unit: 4}\n"
      "  - key: y\n    rate_limit: {unit: year, requests_per_unit: 5}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const struct {
    std::string key;
    std::chrono::seconds period;
    RateLimit::Unit unit;
  } cases[] = {{"s", std::chrono::seconds(1), RateLimit::SECOND},
               {"m", std::chrono::seconds(60), RateLimit::MINUTE},
               {"w", std::chrono::seconds(7 * 86400), RateLimit::WEEK},
               {"mo", std::chrono::seconds(30 * 86400), RateLimit::MONTH},
               {"y", std::chrono::seconds(365 * 86400), RateLimit::YEAR}};
  for (const auto& c : cases) {
    const RlsLimit* limit = (*config)->Find("d", Descriptor({{c.key, "x"}}));
    ASSERT_NE(limit, nullptr) << c.key;
    EXPECT_EQ(limit->unit, c.unit);
    ASSERT_TRUE(limit->policy.has_value());
    EXPECT_EQ(limit->policy->algorithm, Algorithm::kFixedWindow);
    EXPECT_EQ(limit->policy->period, c.period) << c.key;
    EXPECT_TRUE(limit->upstream_window);
    EXPECT_EQ(limit->stats_key, "d." + c.key);
  }
}

TEST(RlsConfigTest, ExtensionsBuildFloodgatePolicies) {
  auto config = Parse(
      "domain: d\n"
      "all_or_nothing: true\n"
      "descriptors:\n"
      "  - key: p\n    rate_limit: {period: 30s, requests_per_unit: 7}\n"
      "  - key: t\n    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket,"
      " burst: 10, refill: interval}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)->Domain("d")->all_or_nothing);
  const RlsLimit* period = (*config)->Find("d", Descriptor({{"p", ""}}));
  ASSERT_NE(period, nullptr);
  EXPECT_EQ(period->policy->period, std::chrono::seconds(30));
  EXPECT_EQ(period->unit, RateLimit::UNKNOWN);
  EXPECT_FALSE(period->upstream_window);
  const RlsLimit* bucket = (*config)->Find("d", Descriptor({{"t", ""}}));
  ASSERT_NE(bucket, nullptr);
  EXPECT_EQ(bucket->policy->ToString(), "token_bucket:60/1m,burst=10,refill=interval");
}

TEST(RlsConfigTest, PrefetchIsARateLimitOption) {
  auto config = Parse(
      "domain: d\n"
      "descriptors:\n"
      "  - key: hot\n    rate_limit: {unit: second, requests_per_unit: 1000, prefetch: auto,"
      " prefetch_ttl: 50ms}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const RlsLimit* hot = (*config)->Find("d", Descriptor({{"hot", ""}}));
  ASSERT_NE(hot, nullptr);
  EXPECT_EQ(hot->policy->ToString(), "fixed_window:1000/1s,prefetch=auto,prefetch_ttl=50ms");
  EXPECT_TRUE(hot->upstream_window);  // prefetch changes how it is decided, not the answer
  auto bad = Parse(
      "domain: d\n"
      "descriptors:\n"
      "  - key: hot\n    rate_limit: {unit: second, requests_per_unit: 10, prefetch: 0}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("prefetch must be between 1 and 1000000000 units"));
}

// The matching table of upstream's GetLimit.
constexpr const char* kMatching = R"(domain: d
descriptors:
  - key: k
    value: exact
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: pre*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: p*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: parent
    rate_limit: {unit: second, requests_per_unit: 5}
    descriptors:
      - key: child
        value: c
        rate_limit: {unit: second, requests_per_unit: 6}
      - key: child
        rate_limit: {unit: second, requests_per_unit: 7}
  - key: nolimit
    descriptors:
      - key: leaf
        rate_limit: {unit: second, requests_per_unit: 8}
  - key: unl
    rate_limit: {unlimited: true}
)";

struct MatchCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> entries;
  std::uint32_t expected;  // requests_per_unit; 0: no limit
};

class MatchingTest : public ::testing::TestWithParam<MatchCase> {};

TEST_P(MatchingTest, AsUpstreamGetLimit) {
  auto config = Parse(kMatching);
  ASSERT_TRUE(config.ok()) << config.status();
  ext::RateLimitDescriptor descriptor;
  for (const auto& [key, value] : GetParam().entries) {
    auto* entry = descriptor.add_entries();
    entry->set_key(key);
    entry->set_value(value);
  }
  const RlsLimit* limit = (*config)->Find("d", descriptor);
  if (GetParam().expected == 0) {
    EXPECT_EQ(limit, nullptr);
  } else {
    ASSERT_NE(limit, nullptr);
    EXPECT_EQ(limit->requests_per_unit, GetParam().expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, MatchingTest,
    ::testing::Values(MatchCase{"exact", {{"k", "exact"}}, 1},
                      // Wildcards in file order: "pre*" comes before "p*".
                      MatchCase{"first_wildcard", {{"k", "prefix"}}, 2},
                      MatchCase{"second_wildcard", {{"k", "pa"}}, 3},
                      MatchCase{"default", {{"k", "other"}}, 4},
                      MatchCase{"default_empty_value", {{"k", ""}}, 4},
                      MatchCase{"nested_exact", {{"parent", "x"}, {"child", "c"}}, 6},
                      MatchCase{"nested_default", {{"parent", "x"}, {"child", "z"}}, 7},
                      // The limit comes from the node the last entry reaches: "parent"'s own limit
                      // does not apply to a longer descriptor...
                      MatchCase{"intermediate_not_applied", {{"parent", "x"}, {"unknown", "z"}}, 0},
                      // ...and a deeper node's limit not to a shorter one.
                      MatchCase{"parent_alone", {{"parent", "x"}}, 5},
                      MatchCase{"no_limit_on_node", {{"nolimit", "x"}}, 0},
                      MatchCase{"leaf_under_no_limit", {{"nolimit", "x"}, {"leaf", "y"}}, 8},
                      MatchCase{"deeper_than_config", {{"k", "exact"}, {"more", "x"}}, 0},
                      MatchCase{"no_match", {{"nothing", "x"}}, 0}),
    [](const auto& info) { return info.param.name; });

TEST(RlsConfigTest, UnknownDomainHasNoLimit) {
  auto config = Parse(kMatching);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*config)->Find("other", Descriptor({{"k", "exact"}})), nullptr);
}

TEST(RlsConfigTest, UnlimitedAndShadowAndReplacesAreRead) {
  auto config = Parse(
      "domain: d\n"
      "descriptors:\n"
      "  - key: u\n    rate_limit: {unlimited: true}\n"
      "  - key: s\n    shadow_mode: true\n    detailed_metric: true\n"
      "    rate_limit: {unit: hour, requests_per_unit: 3, name: small, replaces: [{name: big}]}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const RlsLimit* unlimited = (*config)->Find("d", Descriptor({{"u", "1"}}));
  ASSERT_NE(unlimited, nullptr);
  EXPECT_TRUE(unlimited->unlimited);
  EXPECT_FALSE(unlimited->policy.has_value());
  const RlsLimit* shadow = (*config)->Find("d", Descriptor({{"s", "1"}}));
  ASSERT_NE(shadow, nullptr);
  EXPECT_TRUE(shadow->shadow);
  EXPECT_TRUE(shadow->detailed_metric);
  EXPECT_EQ(shadow->name, "small");
  EXPECT_THAT(shadow->replaces, ::testing::ElementsAre("big"));
}

TEST(RlsConfigTest, EmptyValueMeansKeyOnly) {
  // Upstream: value "" is the key-only default, so it collides with a bare key.
  EXPECT_THAT(ErrorOf("domain: d\ndescriptors:\n  - key: k\n  - key: k\n    value: \"\"\n"),
              HasSubstr("duplicate descriptor composite key 'd.k'"));
}

}  // namespace
}  // namespace floodgate::server::rls
