// The CLI's building blocks: trace parsing, the replay summary, the latency histogram.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/bench_support.h"
#include "cli/replay_summary.h"
#include "cli/trace.h"
#include "common/strings.h"

namespace floodgate::cli {
namespace {

using ::testing::HasSubstr;

TEST(TraceParser, ReadsFieldsInAnyOrderAndIgnoresOthers) {
  TraceParser parser;
  auto e = parser.Parse(R"({"key":"user:1","path":"/x","t":1700000000000000,"cost":3})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->t, 1700000000000000);
  EXPECT_EQ(e->key, "user:1");
  EXPECT_EQ(e->cost, 3);
  e = parser.Parse(R"({"t":5,"key":"a\"b\u00e9"})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->key, "a\"b\xc3\xa9");
  EXPECT_EQ(e->cost, 1);
}

TEST(TraceParser, RejectsBadLinesNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"nonsense", "not valid JSON"},
      {R"({"t":1,"key":"a"} trailing)", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"key":"a"})", "missing \"t\""},
      {R"({"t":1})", "missing \"key\""},
      {R"({"t":-1,"key":"a"})", "\"t\" must be a whole number"},
      {R"({"t":1.5,"key":"a"})", "\"t\" must be a whole number"},
      {R"({"t":"1","key":"a"})", "\"t\" must be a whole number"},
      {R"({"t":1,"key":7})", "\"key\" must be a string"},
      {R"({"t":1,"key":""})", "\"key\" must not be empty"},
      {R"({"t":1,"key":"a","cost":-1})", "\"cost\" must be a whole number between 0"},
      {R"({"t":1,"key":"a","cost":1000000001})", "\"cost\" must be a whole number between 0"},
  };
  TraceParser parser;
  for (const auto& [line, message] : cases) {
    auto e = parser.Parse(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_THAT(std::string(MessageOf(e.status())), HasSubstr(message)) << line;
  }
  auto huge = parser.Parse(R"({"t":1,"key":")" + std::string(513, 'k') + R"("})");
  EXPECT_THAT(std::string(MessageOf(huge.status())), HasSubstr("\"key\" is 513 bytes"));
}

TEST(ReplaySummary, CountsAndRanksDeniedKeys) {
  ReplaySummary summary;
  Decision allowed, denied;
  allowed.allowed = true;
  for (int i = 0; i < 5; ++i) summary.Add("quiet", allowed, i);
  for (int i = 0; i < 3; ++i) summary.Add("noisy", denied, 10 + i);
  summary.Add("noisy", allowed, 20);
  summary.Add("medium", denied, 2'000'020);
  EXPECT_EQ(summary.allowed(), 6u);
  EXPECT_EQ(summary.denied(), 4u);
  const std::string text = summary.Render("gcra:1/1s", 10, 1.0);
  EXPECT_THAT(text, HasSubstr("replayed 10 requests over 3 keys"));
  EXPECT_THAT(text, HasSubstr("denied     4 (40.00%)"));
  EXPECT_THAT(text, HasSubstr("trace span 2.000 s"));
  EXPECT_THAT(text, HasSubstr("top 2 denied keys (2 keys had denials)"));
  EXPECT_LT(text.find("noisy"), text.find("medium"));  // ranked by denials
  EXPECT_EQ(text.find("quiet"), std::string::npos);    // never denied: not listed
}

TEST(ReplaySummary, CountsDelayedAdmissions) {
  ReplaySummary summary;
  Decision now, later;
  now.allowed = later.allowed = true;
  later.delay = std::chrono::milliseconds(30);
  summary.Add("k", now, 0);
  summary.Add("k", later, 1);
  later.delay = std::chrono::milliseconds(10);
  summary.Add("k", later, 2);
  EXPECT_THAT(summary.Render("gcra:1/1s,delay=1s", 10, 1.0),
              HasSubstr("delayed    2 of the allowed (mean 20.000 ms, max 30.000 ms)"));
  EXPECT_THAT(ReplaySummary().Render("gcra:1/1s", 10, 1.0), ::testing::Not(HasSubstr("delayed")));
}

TEST(LatencyHistogram, PercentilesWithinTwoPercent) {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 100'000; ++v) h.Record(v * 10);  // 10 ns .. 1 ms
  EXPECT_EQ(h.count(), 100'000u);
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double truth = q * 1'000'000;
    EXPECT_NEAR(static_cast<double>(h.Percentile(q)), truth, truth * 0.02) << q;
  }
  LatencyHistogram other;
  other.Record(5'000'000'000);
  h.Merge(other);
  EXPECT_NEAR(static_cast<double>(h.Percentile(1.0)), 5e9, 5e9 * 0.02);
}

TEST(KeySequence, ZipfPutsMostTrafficOnFewKeys) {
  const KeySequence uniform(1000, 0, 1, 1 << 16);
  const KeySequence zipf(1000, 1.1, 1, 1 << 16);
  std::vector<int> u(1000), z(1000);
  for (std::size_t i = 0; i < (1 << 16); ++i) {
    ++u[uniform[i]];
    ++z[zipf[i]];
  }
  std::sort(u.rbegin(), u.rend());
  std::sort(z.rbegin(), z.rend());
  const auto top10 = [](const std::vector<int>& v) {
    return std::accumulate(v.begin(), v.begin() + 10, 0) / double(1 << 16);
  };
  EXPECT_LT(top10(u), 0.03);
  EXPECT_GT(top10(z), 0.35);  // Zipf(1.1) over 1000 ranks: the top 10 carry ~45%
}

}  // namespace
}  // namespace floodgate::cli
