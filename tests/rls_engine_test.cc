// The RLS engine on real stores with real protobuf messages.
//
// Upstream's answers (statuses, counts per unit, hits_addend, overrides, shadow, replaces,
// unlimited, headers), floodgate's extensions and failure behaviour. Time is fixed per test.

#include "server/rls/rls_engine.h"

#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "hang_guard.h"
#include "rls_request.h"
#include "server/rls/config.h"

namespace floodgate::server::rls {
namespace {

using Response = pb::RateLimitResponse;

// 2026-01-01T00:00:00.250Z: a quarter second into a second, minute, hour and day.
constexpr TimePoint kStart{std::chrono::microseconds(1'767'225'600'250'000)};

std::shared_ptr<const RlsConfig> Config(const std::string& yaml) {
  auto config = ParseRlsConfig({{"test.yaml", yaml}});
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : nullptr;
}

using Descriptor = ::floodgate::testing::RlsDescriptor;
using ::floodgate::testing::RlsRequest;

class RlsEngineTest : public ::testing::Test {
 protected:
  void Start(const std::string& yaml, RlsSettings settings = {}) {
    engine_ = std::make_unique<RlsEngine>(store_, std::move(settings), Config(yaml), metrics_,
                                          [this] { return std::optional<TimePoint>(now_); });
  }

  // The engine answers memory:// inline; the answer must have come by the time it returns.
  absl::StatusOr<Response> Ask(const pb::RateLimitRequest& request) {
    Response response;
    std::optional<absl::Status> result;
    engine_->ShouldRateLimit(request, &response, [&](absl::Status s) { result = s; });
    EXPECT_TRUE(result.has_value()) << "no answer";
    if (!result.has_value()) return absl::InternalError("no answer");
    if (!result->ok()) return *result;
    return response;
  }
  Response AskOk(const pb::RateLimitRequest& request) {
    auto response = Ask(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response();
  }

  MemoryStore store_;
  RlsMetrics metrics_;
  TimePoint now_ = kStart;
  std::unique_ptr<RlsEngine> engine_;
};

constexpr const char* kBasic = R"(domain: d
descriptors:
  - key: per_second
    rate_limit: {unit: second, requests_per_unit: 3, name: ps}
  - key: per_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: per_day
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: unl
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
)";

TEST_F(RlsEngineTest, RequestChecksUseUpstreamTexts) {
  Start(kBasic);
  auto no_domain = Ask(RlsRequest("", {{{{"per_second", "a"}}}}));
  EXPECT_EQ(no_domain.status(), absl::InvalidArgumentError("rate limit domain must not be empty"));
  auto no_descriptors = Ask(RlsRequest("d", {}));
  EXPECT_EQ(no_descriptors.status(),
            absl::InvalidArgumentError("rate limit descriptor list must not be empty"));
}

// Issue 39: 10,000 descriptors in one request queued past the Redis store's timeout and
// opened its breaker for every client. At most kMaxDescriptors, refused before any work.
TEST_F(RlsEngineTest, DescriptorsPerRequestAreBoundedBeforeAnyIsDecided) {
  Start(kBasic);
  std::vector<Descriptor> descriptors(kMaxDescriptors, Descriptor{{{"per_day", "x"}}});
  const auto decisions = [&] { return metrics_.Get("d.per_day", RlsMetrics::kTotalHits); };
  EXPECT_TRUE(Ask(RlsRequest("d", descriptors)).ok());  // 64: decided
  const std::uint64_t before = decisions();
  EXPECT_EQ(before, static_cast<std::uint64_t>(kMaxDescriptors));
  descriptors.resize(10'000, Descriptor{{{"per_day", "x"}}});
  for (const std::size_t n : {std::size_t{kMaxDescriptors + 1}, std::size_t{10'000}}) {
    descriptors.resize(n);
    auto refused = Ask(RlsRequest("d", descriptors));
    EXPECT_EQ(refused.status(),
              absl::InvalidArgumentError(fmt::format(
                  "{} descriptors in one request; at most {} are taken", n, kMaxDescriptors)));
  }
  EXPECT_EQ(decisions(), before);  // nothing of them reached the store
}

// A request's keys name the series of its `limit` override (and its last value a
// detailed_metric's): any client could add series, of any length, without bound.
TEST_F(RlsEngineTest, MetricSeriesFromRequestTextAreBounded) {
  Start(kBasic);
  constexpr std::size_t kRequests = RlsMetrics::kMaxSeries + 100;
  for (std::size_t i = 0; i < kRequests; ++i) {
    Descriptor d{{{fmt::format("client-chosen-{}-{}", i, std::string(300, 'k')), "v"}}};
    d.limit = std::pair{10u, ::envoy::type::v3::RateLimitUnit::SECOND};
    ASSERT_TRUE(Ask(RlsRequest("d", {d})).ok());
  }
  EXPECT_EQ(metrics_.series(), RlsMetrics::kMaxSeries + 1);  // the rest as one
  EXPECT_EQ(metrics_.Get(RlsMetrics::kOtherSeries, RlsMetrics::kTotalHits),
            kRequests - RlsMetrics::kMaxSeries);
  std::istringstream lines(metrics_.Render());
  for (std::string line; std::getline(lines, line);) {
    ASSERT_LE(line.size(), RlsMetrics::kMaxNameBytes + 64) << line.substr(0, 80);
  }
}

TEST_F(RlsEngineTest, OverLimitWhenTheCountPassesTheLimitPerSecond) {
  Start(kBasic);
  const auto request = RlsRequest("d", {{{{"per_second", "a"}}}});
  for (std::uint32_t remaining : {2u, 1u, 0u}) {
    const Response response = AskOk(request);
    ASSERT_EQ(response.statuses_size(), 1);
    EXPECT_EQ(response.overall_code(), Response::OK);
    const auto& status = response.statuses(0);
    EXPECT_EQ(status.code(), Response::OK);
    EXPECT_EQ(status.limit_remaining(), remaining);
    EXPECT_EQ(status.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(status.current_limit().unit(), Response::RateLimit::SECOND);
    EXPECT_EQ(status.current_limit().name(), "ps");
    // Upstream: whole seconds to the end of the window (0.75 s rounds up to 1).
    EXPECT_EQ(status.duration_until_reset().seconds(), 1);
    EXPECT_EQ(status.duration_until_reset().nanos(), 0);
  }
  const Response over = AskOk(request);
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(metrics_.Get("d.per_second", RlsMetrics::kTotalHits), 4u);
  EXPECT_EQ(metrics_.Get("d.per_second", RlsMetrics::kOverLimit), 1u);
  EXPECT_EQ(metrics_.Get("d.per_second", RlsMetrics::kWithinLimit), 3u);
  const std::string rendered = metrics_.Render();
  EXPECT_THAT(rendered,
              ::testing::HasSubstr("floodgate_rls_total_hits_total{key=\"d.per_second\"} 4\n"));
  EXPECT_THAT(rendered,
              ::testing::HasSubstr("floodgate_rls_over_limit_total{key=\"d.per_second\"} 1\n"));
  // The next epoch-aligned second is a new window.
  now_ += std::chrono::milliseconds(750);
  EXPECT_EQ(AskOk(request).statuses(0).limit_remaining(), 2u);
}

TEST_F(RlsEngineTest, WindowsAreAlignedToTheEpochPerUnit) {
  Start(kBasic);
  now_ = kStart + std::chrono::seconds(20);  // 00:00:20.25
  const Response minute = AskOk(RlsRequest("d", {{{{"per_minute", "x"}}}}));
  EXPECT_EQ(minute.statuses(0).duration_until_reset().seconds(), 40);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_minute", "x"}}}})).overall_code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_minute", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  now_ = kStart + std::chrono::seconds(59);  // 00:00:59.25: the same window
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_minute", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  now_ = kStart + std::chrono::seconds(60);  // 00:01:00.25: the next one
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_minute", "x"}}}})).overall_code(), Response::OK);

  const Response day = AskOk(RlsRequest("d", {{{{"per_day", "x"}}}}));
  EXPECT_EQ(day.statuses(0).duration_until_reset().seconds(), 86400 - 60);
}

TEST_F(RlsEngineTest, DefaultAndWildcardNodesCountPerRequestValue) {
  Start(kBasic);
  for (int i = 0; i < 3; ++i) AskOk(RlsRequest("d", {{{{"per_second", "alice"}}}}));
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "alice"}}}})).overall_code(),
            Response::OVER_LIMIT);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "bob"}}}})).statuses(0).limit_remaining(), 2u);
}

TEST_F(RlsEngineTest, KeysAreUnambiguous) {
  Start(R"(domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a=b
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"a", "b=c"}}}})).overall_code(), Response::OK);
  // Same bytes joined differently: another counter.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"a=b", "c"}}}})).overall_code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"a", "b=c"}}}})).overall_code(), Response::OVER_LIMIT);
}

TEST_F(RlsEngineTest, HitsAddendOfRequestAndDescriptor) {
  Start(kBasic);
  // The request's hits_addend: 2 of 3.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "h"}}}}, 2)).statuses(0).limit_remaining(), 1u);
  // A descriptor's hits_addend 0 checks without counting.
  const Response peek = AskOk(RlsRequest("d", {{{{"per_second", "h"}}, 0}}, 5));
  EXPECT_EQ(peek.overall_code(), Response::OK);
  EXPECT_EQ(peek.statuses(0).limit_remaining(), 1u);
  // A descriptor's hits_addend beats the request's: 1, not 5.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "h"}}, 1}}, 5)).statuses(0).limit_remaining(),
            0u);
  // The request's 0 means 1.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "h"}}}}, 0)).overall_code(),
            Response::OVER_LIMIT);
  EXPECT_EQ(metrics_.Get("d.per_second", RlsMetrics::kTotalHits), 4u);
}

TEST_F(RlsEngineTest, LimitOverrideReplacesTheConfiguredLimit) {
  Start(R"(domain: d
descriptors:
  - key: k
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 100}
)");
  const Descriptor overridden{
      {{"k", "v"}}, std::nullopt, std::pair{1u, ::envoy::type::v3::RateLimitUnit::MINUTE}};
  const Response first = AskOk(RlsRequest("d", {overridden}));
  EXPECT_EQ(first.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(first.statuses(0).current_limit().unit(), Response::RateLimit::MINUTE);
  EXPECT_EQ(first.statuses(0).duration_until_reset().seconds(), 60);
  // Not shadow, although the configured rule is.
  EXPECT_EQ(AskOk(RlsRequest("d", {overridden})).overall_code(), Response::OVER_LIMIT);
  // Without the override the configured (shadow) 100/s applies.
  EXPECT_EQ(
      AskOk(RlsRequest("d", {{{{"k", "v2"}}}})).statuses(0).current_limit().requests_per_unit(),
      100u);
  // An unknown domain ignores overrides, as upstream.
  EXPECT_FALSE(AskOk(RlsRequest("other", {overridden})).statuses(0).has_current_limit());
}

TEST_F(RlsEngineTest, ShadowRuleAnswersOkAndCounts) {
  Start(R"(domain: d
descriptors:
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  AskOk(RlsRequest("d", {{{{"shadowed", "x"}}}}));
  const Response second = AskOk(RlsRequest("d", {{{{"shadowed", "x"}}}}));
  EXPECT_EQ(second.overall_code(), Response::OK);
  EXPECT_EQ(second.statuses(0).code(), Response::OK);
  EXPECT_EQ(second.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(metrics_.Get("d.shadowed", RlsMetrics::kShadowMode), 1u);
  EXPECT_EQ(metrics_.Get("d.shadowed", RlsMetrics::kOverLimit), 1u);
}

TEST_F(RlsEngineTest, GlobalShadowModeAnswersOkOverall) {
  RlsSettings settings;
  settings.global_shadow = true;
  Start(kBasic, settings);
  AskOk(RlsRequest("d", {{{{"per_day", "x"}}}}));
  const Response second = AskOk(RlsRequest("d", {{{{"per_day", "x"}}}}));
  EXPECT_EQ(second.overall_code(), Response::OK);
  // The descriptor still says it is over (upstream only changes the overall code).
  EXPECT_EQ(second.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(metrics_.global_shadow(), 1u);
}

TEST_F(RlsEngineTest, ReplacedLimitIsNotApplied) {
  Start(R"(domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, name: general}
  - key: vip
    rate_limit: {unit: minute, requests_per_unit: 5, name: vip, replaces: [{name: general}]}
)");
  const auto both = RlsRequest("d", {{{{"user", "u"}}}, {{{"vip", "u"}}}});
  for (int i = 0; i < 5; ++i) {
    const Response response = AskOk(both);
    EXPECT_EQ(response.overall_code(), Response::OK) << i;
    EXPECT_FALSE(response.statuses(0).has_current_limit());
    EXPECT_EQ(response.statuses(1).limit_remaining(), static_cast<std::uint32_t>(4 - i));
  }
  EXPECT_EQ(AskOk(both).overall_code(), Response::OVER_LIMIT);
  // Alone, the general limit applies and was never counted above.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"user", "u"}}}})).statuses(0).limit_remaining(), 0u);
}

TEST_F(RlsEngineTest, UnlimitedIsOkWithMaxRemainingAndNotStored) {
  Start(kBasic);
  const Response response = AskOk(RlsRequest("d", {{{{"unl", "x"}}}}));
  EXPECT_EQ(response.overall_code(), Response::OK);
  EXPECT_EQ(response.statuses(0).code(), Response::OK);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 4294967295u);
  EXPECT_FALSE(response.statuses(0).has_current_limit());
  EXPECT_EQ(store_.Stats().keys, 0u);
}

// As upstream's counter: a limit of 0 is over once anything was counted in the window, a
// request of 0 hits included; before that, 0 hits are within it.
TEST_F(RlsEngineTest, ZeroLimitDeniesOnceCounted) {
  Start(kBasic);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"zero", "x"}}, 0}})).overall_code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"zero", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"zero", "x"}}, 0}})).overall_code(), Response::OVER_LIMIT);
}

TEST_F(RlsEngineTest, UnknownDomainAndNoMatchAreOkWithoutLimit) {
  Start(kBasic);
  const Response unknown = AskOk(RlsRequest("nope", {{{{"per_second", "a"}}}}));
  EXPECT_EQ(unknown.overall_code(), Response::OK);
  ASSERT_EQ(unknown.statuses_size(), 1);
  EXPECT_EQ(unknown.statuses(0).code(), Response::OK);
  EXPECT_FALSE(unknown.statuses(0).has_current_limit());
  const Response no_match = AskOk(RlsRequest("d", {{{{"nothing", "a"}}}, {{{"per_day", "z"}}}}));
  ASSERT_EQ(no_match.statuses_size(), 2);
  EXPECT_FALSE(no_match.statuses(0).has_current_limit());
  EXPECT_TRUE(no_match.statuses(1).has_current_limit());
  EXPECT_EQ(store_.Stats().keys, 1u);
}

TEST_F(RlsEngineTest, HeadersFromTheDescriptorWithTheLeastRemaining) {
  RlsSettings settings;
  settings.response_headers = true;
  settings.remaining_header = "X-Left";
  Start(kBasic, settings);
  const Response response =
      AskOk(RlsRequest("d", {{{{"per_second", "a"}}}, {{{"per_minute", "a"}}}, {{{"unl", "a"}}}}));
  ASSERT_EQ(response.response_headers_to_add_size(), 3);
  EXPECT_EQ(response.response_headers_to_add(0).key(), "RateLimit-Limit");
  EXPECT_EQ(response.response_headers_to_add(0).value(), "2");  // per_minute: 1 left of 2
  EXPECT_EQ(response.response_headers_to_add(1).key(), "X-Left");
  EXPECT_EQ(response.response_headers_to_add(1).value(), "1");
  EXPECT_EQ(response.response_headers_to_add(2).key(), "RateLimit-Reset");
  EXPECT_EQ(response.response_headers_to_add(2).value(), "60");
  // Off by default.
  Start(kBasic);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"per_second", "b"}}}})).response_headers_to_add_size(), 0);
}

// Upstream's #1060: a denied request still counts against the request's other limits.
constexpr const char* kPollution = R"(domain: %s
%s
descriptors:
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: small
    rate_limit: {unit: minute, requests_per_unit: 1}
)";

std::string Pollution(const char* domain, const char* extra) {
  char text[512];
  std::snprintf(text, sizeof text, kPollution, domain, extra);
  return text;
}

TEST_F(RlsEngineTest, DefaultModeSpendsOtherLimitsOfADeniedRequest) {
  Start(Pollution("d", ""));
  const auto both = RlsRequest("d", {{{{"big", "u"}}}, {{{"small", "u"}}}});
  AskOk(both);
  const Response denied = AskOk(both);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OK);
  // Two requests, one denied: the big limit counted both (as upstream does).
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"big", "u"}}, 0}})).statuses(0).limit_remaining(), 8u);
}

TEST_F(RlsEngineTest, AllOrNothingSpendsNothingOnADeniedRequest) {
  Start(Pollution("d", "all_or_nothing: true"));
  const auto both = RlsRequest("d", {{{{"big", "u"}}}, {{{"small", "u"}}}});
  AskOk(both);
  const Response denied = AskOk(both);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"big", "u"}}, 0}})).statuses(0).limit_remaining(), 9u);
}

TEST_F(RlsEngineTest, AllOrNothingMergesOneCounterAndBoundsItems) {
  Start(Pollution("d", "all_or_nothing: true"));
  // The same descriptor twice is one counter with the hits added: 2 + 9 > 10.
  const Response merged = AskOk(RlsRequest("d", {{{{"big", "m"}}, 2}, {{{"big", "m"}}, 9}}));
  EXPECT_EQ(merged.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"big", "m"}}, 2}, {{{"big", "m"}}, 8}})).overall_code(),
            Response::OK);
  std::vector<Descriptor> many;
  for (int i = 0; i < 17; ++i) many.push_back({{{"big", std::to_string(i)}}});
  auto refused = Ask(RlsRequest("d", many));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("at most 16"));
}

TEST_F(RlsEngineTest, AllOrNothingZeroLimitSpendsNothingElse) {
  Start(R"(domain: d
all_or_nothing: true
descriptors:
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
)");
  const Response denied = AskOk(RlsRequest("d", {{{{"big", "z"}}}, {{{"closed", "z"}}}}));
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OK);
  EXPECT_EQ(denied.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"big", "z"}}, 0}})).statuses(0).limit_remaining(), 10u);
}

TEST_F(RlsEngineTest, ExtensionsPeriodAndAlgorithm) {
  Start(R"(domain: d
descriptors:
  - key: thirty
    rate_limit: {period: 30s, requests_per_unit: 1}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 2}
)");
  now_ = kStart + std::chrono::seconds(10);  // 10.25 s into a 30 s window
  const Response first = AskOk(RlsRequest("d", {{{{"thirty", "x"}}}}));
  EXPECT_EQ(first.statuses(0).current_limit().unit(), Response::RateLimit::UNKNOWN);
  EXPECT_EQ(first.statuses(0).duration_until_reset().seconds(), 19);
  EXPECT_EQ(first.statuses(0).duration_until_reset().nanos(), 750'000'000);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"thirty", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  now_ = kStart + std::chrono::seconds(30);  // 00:00:30.25: the next 30 s window
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"thirty", "x"}}}})).overall_code(), Response::OK);

  // A burst of 2, then one per second.
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"bucket", "x"}}}})).overall_code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"bucket", "x"}}}})).overall_code(), Response::OK);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"bucket", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  now_ += std::chrono::seconds(1);
  EXPECT_EQ(AskOk(RlsRequest("d", {{{{"bucket", "x"}}}})).overall_code(), Response::OK);
}

TEST_F(RlsEngineTest, ConfigSwapAppliesToLaterRequests) {
  Start(kBasic);
  EXPECT_TRUE(AskOk(RlsRequest("d", {{{{"per_day", "x"}}}})).statuses(0).has_current_limit());
  engine_->SetConfig(Config("domain: other\n"));
  EXPECT_FALSE(AskOk(RlsRequest("d", {{{{"per_day", "x"}}}})).statuses(0).has_current_limit());
}

// Requests from several threads while the config is swapped under them: every request
// is answered, by one config or the other, and the counter stays exact (both configs give
// the same limit, so exactly that many are admitted).
TEST_F(RlsEngineTest, ConcurrentRequestsDuringConfigSwaps) {
  const std::string yaml = R"(domain: d
descriptors:
  - key: shared
    rate_limit: {unit: hour, requests_per_unit: 300}
)";
  Start(yaml);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;  // 800 requests for 300 admissions
  std::atomic<int> allowed{0};
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      const auto request = RlsRequest("d", {{{{"shared", "x"}}}});
      for (int i = 0; i < kPerThread; ++i) {
        Response response;
        engine_->ShouldRateLimit(request, &response, [&](absl::Status s) {
          if (!s.ok()) return;
          answered.fetch_add(1);
          if (response.overall_code() == Response::OK) allowed.fetch_add(1);
        });
      }
    });
  }
  for (int swap = 0; swap < 50; ++swap) engine_->SetConfig(Config(yaml));
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(answered.load(), kThreads * kPerThread);
  EXPECT_EQ(allowed.load(), 300);
}

TEST_F(RlsEngineTest, BadOverrideIsInvalidArgument) {
  Start(kBasic);
  auto response =
      Ask(RlsRequest("d", {{{{"per_day", "x"}},
                            std::nullopt,
                            std::pair{5u, ::envoy::type::v3::RateLimitUnit::UNKNOWN}}}));
  EXPECT_TRUE(absl::IsInvalidArgument(response.status())) << response.status();
}

// A store whose backend is down: a redis:// URL on a loopback port nothing listens on, so
// every decision fails at once and on_error answers.
class DegradedTest : public ::testing::TestWithParam<std::string> {};

absl::StatusOr<Response> AskDead(const std::string& on_error, bool unavailable,
                                 RlsMetrics& metrics) {
  auto store = OpenStore("redis://127.0.0.1:1?timeout=50ms&lazy_connect=1&on_error=" + on_error);
  if (!store.ok()) return store.status();
  RlsSettings settings;
  settings.unavailable_on_store_error = unavailable;
  RlsEngine engine(**store, settings, Config(kBasic), metrics);
  Response response;
  std::promise<absl::Status> answered;
  engine.ShouldRateLimit(RlsRequest("d", {{{{"per_day", "x"}}}}), &response,
                         [&](absl::Status s) { answered.set_value(s); });
  auto future = answered.get_future();
  // Answered by on_error at once (nothing listens there); the wait only guards a hang.
  if (future.wait_for(floodgate::testing::kHangGuard) != std::future_status::ready) {
    return absl::DeadlineExceededError("no answer: a hang");
  }
  const absl::Status status = future.get();
  (*store)->Close();
  if (!status.ok()) return status;
  return response;
}

TEST(RlsDegradedTest, StoreFailureAnsweredByOnError) {
  RlsMetrics metrics;
  auto open = AskDead("fail_open", false, metrics);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->overall_code(), Response::OK);
  auto closed = AskDead("fail_closed", false, metrics);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(metrics.Get("d.per_day", RlsMetrics::kDegraded), 2u);
}

TEST(RlsDegradedTest, OnErrorErrorAnswersUnavailable) {
  RlsMetrics metrics;
  auto response = AskDead("fail_open", true, metrics);
  EXPECT_TRUE(absl::IsUnavailable(response.status())) << response.status();
}

}  // namespace
}  // namespace floodgate::server::rls
