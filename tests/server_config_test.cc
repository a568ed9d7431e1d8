// The service's config file: what it parses, and every error naming file, line and reason.

#include <filesystem>
#include <fstream>

#include "alias_bomb.h"
#include "server/config_file.h"
#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

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
        BadConfig{"store: {url: 'memory://?max_bytes=1k'}",
                  "bad.yaml:1: store.url: memory:// option max_bytes must be a positive integer"},
        BadConfig{"trusted_proxies: [10.0.0.0/33]", "is not an IP address or CIDR"},
        BadConfig{"authz_deny_status: 500", "authz_deny_status must be a whole number from 400"},
        BadConfig{"authz_deny_status: 404", "authz_deny_status must be 429 or 403"},
        BadConfig{"demo: perhaps", "demo must be true or false"},
        // A key given twice is refused with its name and line (yaml-cpp kept the first).
        BadConfig{"rules:\n  - name: a\n    policy: 'gcra:1/1s'\n    policy: 'gcra:100/1s'\n",
                  "bad.yaml:4: key \"policy\" given twice in one mapping (first on line 3)"},
        BadConfig{"demo: false\nlisten: 127.0.0.1:1\ndemo: true\n",
                  "bad.yaml:3: key \"demo\" given twice in one mapping (first on line 1)"},
        BadConfig{"rules: &r [{name: a, policy: 'gcra:1/1s', match: *r}]\n",
                  "bad.yaml:1: alias *r is inside the node its anchor names: a loop"},
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
                  "most 16 apply to one request"},
        // Rules naming a method meet the requests of that method only.
        BadConfig{"rules:\n" +
                      [] {
                        std::string rules;
                        for (int i = 0; i < 17; ++i) {
                          rules += "  - {name: r" + std::to_string(i) +
                                   ", match: {methods: [GET]}, policy: 'gcra:1/1s'}\n";
                        }
                        return rules;
                      }(),
                  "bad.yaml:18: a GET request to / matches rules r0, r1, r2, r3, r4, r5, r6, r7, "
                  "r8, r9, r10, r11, r12, r13, r14, r15, r16 with 17 limits in all; at most 16 "
                  "apply to one request"}),
    [](const auto& info) { return std::to_string(info.index); });

// The most limits one request meets is counted per method: a rule for GET and POST meets
// the GET rule's limits or the POST rule's, never both (24 in all, 16 at most at once).
TEST(Config, LimitsPerRequestAreCountedPerMethod) {
  const auto limits = [](const std::string& name) {
    std::string list;
    for (int i = 0; i < 8; ++i) {
      list += (i ? ", " : "") + fmt::format("{{name: {}{}, policy: 'gcra:1/1s'}}", name, i);
    }
    return "[" + list + "]";
  };
  auto config =
      ParseConfig("rules:\n  - {name: both, match: {methods: [GET, POST]}, limits: " + limits("b") +
                      "}\n  - {name: get, match: {methods: [GET]}, limits: " + limits("g") +
                      "}\n  - {name: post, match: {methods: [POST]}, "
                      "limits: " +
                      limits("p") + "}\n",
                  "m.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  for (const char* method : {"GET", "POST"}) {
    std::size_t met = 0;
    for (const Rule* rule : config->MatchAll(method, "/x")) met += rule->limits.size();
    EXPECT_EQ(met, 16u) << method;
  }
}

// 100,001 rules by an alias each, 0.5 MB: refused by their count before any is parsed.
TEST(Config, RefusesMoreRulesThanTheBound) {
  std::string yaml = "rules:\n  - &r {name: a, policy: 'gcra:1/1s'}\n";
  for (std::size_t i = 0; i < kMaxRules; ++i) yaml += "  - *r\n";
  auto config = ParseConfig(yaml, "many.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "many.yaml:2: rules: 100001 rules; a config has at most 100000 (docs/security.md)");
}

// A 3 KB file of aliases ten wide and seven deep names 10^7 nodes: refused by their count
// from a pass over the text, before yaml-cpp builds any.
TEST(Config, RefusesAnAliasBombByItsNodeCount) {
  auto config = ParseConfig("demo: false\n" + testing::AliasBomb(10, 7), "b.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("b.yaml:3: more than 1000000 YAML nodes in one config once aliases are "
                        "expanded"));
}

// The file itself: a FIFO, a /proc file or a 3 GB file is refused before it is read
// (the FIFO blocked the open, the 3 GB took 16 s and 6.3 GB).
TEST(Config, LoadReadsOnlyARegularFileWithinTheByteBound) {
  std::string pattern = (std::filesystem::temp_directory_path() / "config-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path dir = pattern;
  std::filesystem::create_symlink("/proc/self/status", dir / "status.yaml");
  EXPECT_THAT(LoadConfig((dir / "status.yaml").string()).status().message(),
              HasSubstr("a file of /proc or /sys, not a config file"));
  const std::filesystem::path big = dir / "big.yaml";
  std::ofstream(big) << "demo: false\n";
  std::filesystem::resize_file(big, kMaxConfigBytes + 1);  // sparse: nothing written
  EXPECT_EQ(LoadConfig(big.string()).status().message(),
            big.string() + ": 16777217 bytes; a config has at most 16777216 (docs/security.md)");
  std::ofstream(dir / "ok.yaml") << "demo: false\n";
  std::filesystem::create_symlink(dir / "ok.yaml", dir / "link.yaml");
  auto linked = LoadConfig((dir / "link.yaml").string());
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_FALSE(linked->demo);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::server
