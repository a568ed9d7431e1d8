// Policy strings: parsed, printed back, and refused with a message naming the bad part.

#include <floodgate/policy.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

TEST(PolicyParse, ServiceSpecExamples) {
  auto p = Policy::Parse("gcra:100/1m,burst=20");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->algorithm, Algorithm::kGcra);
  EXPECT_EQ(p->limit, 100);
  EXPECT_EQ(p->period, std::chrono::minutes(1));
  EXPECT_EQ(p->capacity(), 20);

  p = Policy::Parse("sliding_log:5/15m");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->algorithm, Algorithm::kSlidingLog);
  EXPECT_EQ(p->period, std::chrono::minutes(15));
  EXPECT_EQ(p->capacity(), 5);

  p = Policy::Parse("token_bucket:1/1s,burst=10,refill=interval");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(p->refill, Refill::kInterval);
  EXPECT_EQ(p->capacity(), 10);
}

TEST(PolicyParse, BareUnitMeansOne) {
  auto p = Policy::Parse("fixed_window:10/s");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->period, std::chrono::seconds(1));
}

TEST(PolicyParse, EveryUnit) {
  const std::pair<const char*, microseconds> cases[] = {
      {"gcra:1/1000us", microseconds(1000)},  {"gcra:1/5ms", std::chrono::milliseconds(5)},
      {"gcra:1/2s", std::chrono::seconds(2)}, {"gcra:1/3m", std::chrono::minutes(3)},
      {"gcra:1/4h", std::chrono::hours(4)},   {"gcra:1/366d", std::chrono::days(366)},
  };
  for (const auto& [text, period] : cases) {
    auto p = Policy::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(p->period, period) << text;
  }
}

TEST(PolicyParse, RoundTripsThroughToString) {
  for (const char* text : {"gcra:100/1m,burst=20", "sliding_log:5/15m", "fixed_window:10/1s",
                           "token_bucket:1/1s,burst=10,refill=interval", "sliding_window:7/90s",
                           "token_bucket:3/1500ms",
                           "token_bucket:5/1s,burst=9,refill=interval,prefetch=3,prefetch_ttl=1s",
                           "sliding_log:5/15m,prefetch=auto", "sliding_window:7/90s,prefetch=1",
                           "gcra:10/1s,prefetch_ttl=1ms,prefetch=1000000000"}) {
    auto p = Policy::Parse(text);
    ASSERT_TRUE(p.ok()) << text;
    auto again = Policy::Parse(p->ToString());
    ASSERT_TRUE(again.ok()) << p->ToString();
    EXPECT_EQ(*again, *p) << text << " -> " << p->ToString();
  }
  EXPECT_EQ(Policy::Parse("sliding_window:7/90s")->ToString(), "sliding_window:7/90s");
  EXPECT_EQ(Policy::Parse("gcra:1/60m")->ToString(), "gcra:1/1h");
}

TEST(PolicyParse, Prefetch) {
  auto p = Policy::Parse("gcra:1000/1s,prefetch=50");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prefetch, Prefetch::kFixed);
  EXPECT_EQ(p->prefetch_units, 50);
  EXPECT_EQ(p->prefetch_ttl, kDefaultPrefetchTtl);
  EXPECT_EQ(p->ToString(), "gcra:1000/1s,prefetch=50");
  p = Policy::Parse("fixed_window:100/1m,prefetch=auto,prefetch_ttl=250ms");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prefetch, Prefetch::kAuto);
  EXPECT_EQ(p->prefetch_units, 0);
  EXPECT_EQ(p->prefetch_ttl, std::chrono::milliseconds(250));
  EXPECT_EQ(p->ToString(), "fixed_window:100/1m,prefetch=auto,prefetch_ttl=250ms");
  EXPECT_EQ(*Policy::Parse(p->ToString()), *p);
  // Prefetch is the client's: the shared state is decided under the policy without it.
  EXPECT_EQ(p->WithoutPrefetch(), *Policy::Parse("fixed_window:100/1m"));
  EXPECT_NE(*p, *Policy::Parse("fixed_window:100/1m"));
}

TEST(PolicyParse, Block) {
  auto p = Policy::Parse("gcra:5/1m,block=15m");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->block, std::chrono::minutes(15));
  EXPECT_EQ(p->ToString(), "gcra:5/1m,block=15m");
  EXPECT_EQ(*Policy::Parse(p->ToString()), *p);
  EXPECT_NE(*p, *Policy::Parse("gcra:5/1m"));
  for (const char* text : {"token_bucket:5/1s,burst=9,refill=interval,block=1ms",
                           "gcra:5/15m,block=366d", "sliding_window:7/90s,block=2h",
                           "fixed_window:10/1s,prefetch=2,block=30s", "sliding_log:3/1s,block=1m"}) {
    p = Policy::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(p->ToString(), text);
  }
  EXPECT_EQ(Policy::Parse("gcra:1/1s").value().block.count(), 0);
  const auto refused = [](const char* text) {
    auto parsed = Policy::Parse(text);
    return parsed.ok() ? std::string("accepted") : std::string(MessageOf(parsed.status()));
  };
  EXPECT_THAT(refused("gcra:5/1m,block=0s"), HasSubstr("between 1ms and 366d"));
  EXPECT_THAT(refused("gcra:5/1m,block=999us"), HasSubstr("between 1ms and 366d, got 999us"));
  EXPECT_THAT(refused("gcra:5/1m,block=367d"), HasSubstr("longer than 366d"));
  EXPECT_THAT(refused("gcra:5/1m,block=5"), HasSubstr("needs a unit"));
  EXPECT_THAT(refused("gcra:5/1m,block=1s,block=2s"), HasSubstr("block given twice"));
  EXPECT_THAT(refused("concurrency:3,block=1m"), HasSubstr("block is not for concurrency"));
  Policy concurrency = *Policy::Parse("concurrency:3");
  concurrency.block = std::chrono::seconds(1);
  EXPECT_THAT(std::string(MessageOf(concurrency.Validate())), HasSubstr("not for concurrency"));
}

TEST(PolicyParse, Delay) {
  auto p = Policy::Parse("gcra:10/1s,burst=20,delay=1s");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->delay, std::chrono::seconds(1));
  EXPECT_EQ(*Policy::Parse(p->ToString()), *p);
  for (const char* text : {"token_bucket:5/1s,burst=9,refill=interval,delay=1ms",
                           "token_bucket:5/1s,delay=1h", "sliding_log:3/1s,delay=250ms"}) {
    p = Policy::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(p->ToString(), text);
  }
  const auto refused = [](const char* text) {
    auto parsed = Policy::Parse(text);
    return parsed.ok() ? std::string("accepted") : std::string(MessageOf(parsed.status()));
  };
  EXPECT_THAT(refused("gcra:5/1m,delay=999us"), HasSubstr("between 1ms and 1h, got 999us"));
  EXPECT_THAT(refused("gcra:5/1m,delay=61m"), HasSubstr("between 1ms and 1h, got 61m"));
  EXPECT_THAT(refused("gcra:5/1m,delay=1s,delay=2s"), HasSubstr("delay given twice"));
  EXPECT_THAT(refused("fixed_window:5/1m,delay=1s"),
              HasSubstr("delay is only for gcra, token_bucket and sliding_log, not fixed_window"));
  EXPECT_THAT(refused("sliding_window:5/1m,delay=1s"), HasSubstr("not sliding_window"));
  EXPECT_THAT(refused("gcra:5/1m,block=1m,delay=1s"), HasSubstr("delay and block"));
  EXPECT_THAT(refused("gcra:5/1m,prefetch=2,delay=1s"), HasSubstr("delay and prefetch"));
  EXPECT_THAT(refused("fixed_window:5/1d,tz=UTC,delay=1s"), HasSubstr("calendar windows (tz=)"));
  EXPECT_THAT(refused("concurrency:3,delay=1s"), HasSubstr("delay is not for concurrency"));
  Policy concurrency = *Policy::Parse("concurrency:3");
  concurrency.delay = std::chrono::seconds(1);
  EXPECT_THAT(std::string(MessageOf(concurrency.Validate())), HasSubstr("not for concurrency"));
}

TEST(PolicyParse, CalendarWindows) {
  auto p = Policy::Parse("fixed_window:10000/1mo,tz=America/New_York");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->calendar, Calendar::kMonth);
  EXPECT_EQ(p->tz, "America/New_York");
  EXPECT_EQ(p->period, std::chrono::days(31));  // the longest month: a bound, not the window
  EXPECT_NE(*p, *Policy::Parse("fixed_window:10000/1mo,tz=Europe/Berlin"));
  for (const char* text :
       {"fixed_window:10000/1mo,tz=America/New_York", "sliding_window:5/1d,tz=Europe/Berlin",
        "fixed_window:3/1w,tz=UTC", "sliding_window:100/1y,block=1h,tz=Asia/Tokyo"}) {
    p = Policy::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(p->ToString(), text);
    EXPECT_EQ(*Policy::Parse(p->ToString()), *p);
  }
  // The day and the week may be written as durations once a zone makes them local.
  EXPECT_EQ(Policy::Parse("fixed_window:5/24h,tz=UTC")->calendar, Calendar::kDay);
  EXPECT_EQ(Policy::Parse("fixed_window:5/7d,tz=UTC")->calendar, Calendar::kWeek);
  EXPECT_EQ(Policy::Parse("fixed_window:5/mo,tz=UTC")->calendar, Calendar::kMonth);
  // Without tz, nothing changes: 1d is 86400 s from the epoch.
  EXPECT_EQ(Policy::Parse("fixed_window:5/1d")->calendar, Calendar::kNone);
  EXPECT_TRUE(Policy::Parse("fixed_window:5/1d")->tz.empty());

  const auto refused = [](const char* text) {
    auto parsed = Policy::Parse(text);
    return parsed.ok() ? std::string("accepted") : std::string(MessageOf(parsed.status()));
  };
  EXPECT_THAT(refused("fixed_window:5/1mo"), HasSubstr("add tz="));
  EXPECT_THAT(refused("sliding_window:5/1y"), HasSubstr("add tz="));
  EXPECT_THAT(refused("fixed_window:5/1w"), HasSubstr("add tz="));
  EXPECT_THAT(refused("fixed_window:5/2mo,tz=UTC"), HasSubstr("1d, 1w, 1mo or 1y, got \"2mo\""));
  EXPECT_THAT(refused("fixed_window:5/1h,tz=UTC"), HasSubstr("1d, 1w, 1mo or 1y, got 1h"));
  EXPECT_THAT(refused("fixed_window:5/2d,tz=UTC"), HasSubstr("1d, 1w, 1mo or 1y, got 2d"));
  EXPECT_THAT(refused("gcra:5/1d,tz=UTC"), HasSubstr("tz is only for fixed_window and "
                                                      "sliding_window, not gcra"));
  EXPECT_THAT(refused("token_bucket:5/1mo,tz=UTC"), HasSubstr("not token_bucket"));
  EXPECT_THAT(refused("sliding_log:5/1d,tz=UTC"), HasSubstr("not sliding_log"));
  EXPECT_THAT(refused("fixed_window:5/1d,tz=Mars/Olympus_Mons"),
              HasSubstr("unknown time zone \"Mars/Olympus_Mons\""));
  EXPECT_THAT(refused("fixed_window:5/1d,tz="), HasSubstr("tz needs a zone name"));
  EXPECT_THAT(refused("fixed_window:5/1d,tz=UTC,tz=UTC"), HasSubstr("tz given twice"));
  EXPECT_THAT(refused("fixed_window:5/1d,tz=UTC,prefetch=3"),
              HasSubstr("prefetch is not for calendar windows"));
  EXPECT_THAT(refused("concurrency:3,tz=UTC"), HasSubstr("unknown option"));

  // Hand-built policies get the same checks.
  Policy built = *Policy::Parse("fixed_window:5/1mo,tz=UTC");
  built.tz.clear();
  EXPECT_THAT(std::string(MessageOf(built.Validate())), HasSubstr("add tz="));
  built = *Policy::Parse("fixed_window:5/1mo,tz=UTC");
  built.period = std::chrono::days(30);
  EXPECT_THAT(std::string(MessageOf(built.Validate())), HasSubstr("keeps period 31d"));
  built = *Policy::Parse("fixed_window:5/1m");
  built.tz = "UTC";
  EXPECT_THAT(std::string(MessageOf(built.Validate())), HasSubstr("tz needs a calendar period"));
  built = *Policy::Parse("concurrency:3");
  built.tz = "UTC";
  EXPECT_THAT(std::string(MessageOf(built.Validate())), HasSubstr("not concurrency"));
}

TEST(PolicyValidate, PrefetchFieldsOfHandBuiltPolicies) {
  Policy p = *Policy::Parse("gcra:10/1s");
  p.prefetch_ttl = std::chrono::seconds(1);  // a ttl without prefetch prints nothing
  EXPECT_FALSE(p.Validate().ok());
  p.prefetch = Prefetch::kAuto;
  EXPECT_TRUE(p.Validate().ok());
  p.prefetch_units = 5;  // only for kFixed
  EXPECT_FALSE(p.Validate().ok());
  p.prefetch = Prefetch::kFixed;
  EXPECT_TRUE(p.Validate().ok());
  p.prefetch_units = 0;
  EXPECT_FALSE(p.Validate().ok());
  Policy concurrency = *Policy::Parse("concurrency:3");
  concurrency.prefetch = Prefetch::kAuto;
  EXPECT_THAT(std::string(MessageOf(concurrency.Validate())), HasSubstr("not for concurrency"));
}

TEST(PolicyParse, Concurrency) {
  auto p = Policy::Parse("concurrency:10");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->algorithm, Algorithm::kConcurrency);
  EXPECT_EQ(p->limit, 10);
  EXPECT_EQ(p->period, kDefaultLease);
  EXPECT_EQ(p->ToString(), "concurrency:10,lease=30s");
  p = Policy::Parse("concurrency:3,lease=90s");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->period, std::chrono::seconds(90));
  EXPECT_EQ(*Policy::Parse(p->ToString()), *p);
}

struct BadPolicy {
  const char* text;
  const char* message;  // a part of the error that names what is wrong
};

class PolicyRejects : public ::testing::TestWithParam<BadPolicy> {};

TEST_P(PolicyRejects, WithAMessageNamingTheBadPart) {
  auto p = Policy::Parse(GetParam().text);
  ASSERT_FALSE(p.ok()) << GetParam().text << " parsed as " << p->ToString();
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(MessageOf(p.status())), HasSubstr(GetParam().message)) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Table, PolicyRejects,
    ::testing::Values(
        BadPolicy{"", "expected ALGORITHM:LIMIT/PERIOD"},
        BadPolicy{"gcra", "expected ALGORITHM:LIMIT/PERIOD"},
        BadPolicy{"leaky:10/1s", "unknown algorithm \"leaky\""},
        BadPolicy{"GCRA:10/1s", "unknown algorithm \"GCRA\""},
        BadPolicy{"gcra:10", "rate \"10\" must be LIMIT/PERIOD"},
        BadPolicy{"gcra:/1s", "limit must be a whole number, got \"\""},
        BadPolicy{"gcra:ten/1s", "limit must be a whole number, got \"ten\""},
        BadPolicy{"gcra:-5/1s", "limit must be a whole number, got \"-5\""},
        BadPolicy{"gcra:1.5/1s", "limit must be a whole number, got \"1.5\""},
        BadPolicy{"gcra: 10/1s", "limit must be a whole number, got \" 10\""},
        BadPolicy{"gcra:0/1s", "limit must be between 1 and 1000000000, got 0"},
        BadPolicy{"gcra:1000000001/1s", "limit must be between 1 and 1000000000"},
        BadPolicy{"gcra:99999999999999999999/1s", "limit must be a whole number"},
        BadPolicy{"gcra:10/", "period \"\" needs a unit"},
        BadPolicy{"gcra:10/10", "period \"10\" needs a unit"},
        BadPolicy{"gcra:10/10x", "period \"10x\" needs a unit"},
        BadPolicy{"gcra:10/1 s", "period \"1 s\" needs a unit"},
        BadPolicy{"gcra:10/999us", "period must be at least 1ms, got 999us"},
        BadPolicy{"gcra:10/0s", "period must be at least 1ms"},
        BadPolicy{"gcra:10/367d", "period \"367d\" is longer than 366d"},
        BadPolicy{"gcra:10/99999999999999999d",
                  "period \"99999999999999999d\" is longer than 366d"},
        BadPolicy{"gcra:10/1s,burst=0", "burst must be >= 1, got 0"},
        BadPolicy{"gcra:10/1s,burst=-1", "burst must be a whole number, got \"-1\""},
        BadPolicy{"gcra:10/1s,burst=", "burst must be a whole number, got \"\""},
        BadPolicy{"gcra:10/1s,burst=2000000000", "burst must be at most 1000000000"},
        BadPolicy{"gcra:1/1d,burst=400", "burst=400 takes longer than 366d to refill"},
        BadPolicy{"concurrency:5/1s", "concurrency takes a number of leases, not a rate"},
        BadPolicy{"concurrency:0", "concurrency holds 1 to 100000 leases, got 0"},
        BadPolicy{"concurrency:100001", "concurrency holds 1 to 100000 leases"},
        BadPolicy{"concurrency:5,lease=25h", "lease must be between 1ms and 24h"},
        BadPolicy{"concurrency:5,lease=10", "lease \"10\" needs a unit"},
        BadPolicy{"concurrency:5,burst=2", "unknown option \"burst=2\" (concurrency takes lease"},
        BadPolicy{"gcra:10/1s,burst=5,burst=6", "burst given twice"},
        BadPolicy{"sliding_log:10/1s,burst=5",
                  "burst is only for gcra and token_bucket, not sliding_log"},
        BadPolicy{"fixed_window:10/1s,burst=5", "burst is only for gcra and token_bucket"},
        BadPolicy{"sliding_window:10/1s,burst=5", "burst is only for gcra and token_bucket"},
        BadPolicy{"gcra:10/1s,refill=interval", "refill is only for token_bucket, not gcra"},
        BadPolicy{"token_bucket:10/1s,refill=leaky",
                  "refill must be smooth or interval, got \"leaky\""},
        BadPolicy{"token_bucket:10/1s,refill=smooth,refill=interval", "refill given twice"},
        // gcra decides in whole µs: E = ceil(P / L) may not slow the rate by over 0.1%.
        BadPolicy{"gcra:30000/1s",
                  "invalid policy \"gcra:30000/1s\": gcra spaces requests in whole µs: "
                  "30000/1s would be 34 µs apart, 2.0% under the limit; use token_bucket, or a "
                  "limit that divides the period"},
        BadPolicy{"gcra:1046/1s,burst=5", "1046/1s would be 957 µs apart, 0.10% under the limit"},
        BadPolicy{"gcra:1000000000/1s", "would be 1 µs apart, 99.9% under the limit"},
        BadPolicy{"sliding_log:100001/1h",
                  "sliding_log keeps a log of the last period's admissions, so its limit is at "
                  "most 100000, got 100001; use sliding_window for larger limits"},
        BadPolicy{"concurrency:5,prefetch=10",
                  "prefetch is not for concurrency: its leases are held and released"},
        BadPolicy{"concurrency:5,prefetch_ttl=1s", "prefetch is not for concurrency"},
        BadPolicy{"gcra:10/1s,prefetch=0", "prefetch must be between 1 and 1000000000 units"},
        BadPolicy{"gcra:10/1s,prefetch=1000000001", "prefetch must be between 1 and 1000000000"},
        BadPolicy{"gcra:10/1s,prefetch=lots", "prefetch must be auto or a whole number"},
        BadPolicy{"gcra:10/1s,prefetch=", "prefetch must be auto or a whole number"},
        BadPolicy{"gcra:10/1s,prefetch=5,prefetch=auto", "prefetch given twice"},
        BadPolicy{"gcra:10/1s,prefetch_ttl=1s", "prefetch_ttl needs prefetch=N or prefetch=auto"},
        BadPolicy{"gcra:10/1s,prefetch=5,prefetch_ttl=25h", "prefetch_ttl must be between 1ms"},
        BadPolicy{"gcra:10/1s,prefetch=5,prefetch_ttl=500us", "prefetch_ttl must be between 1ms"},
        BadPolicy{"gcra:10/1s,prefetch=5,prefetch_ttl=10", "prefetch_ttl \"10\" needs a unit"},
        BadPolicy{"gcra:10/1s,prefetch=5,prefetch_ttl=1s,prefetch_ttl=2s",
                  "prefetch_ttl given twice"},
        BadPolicy{"gcra:10/1s,colour=red", "unknown option \"colour=red\""},
        BadPolicy{"gcra:10/1s,", "unknown option \"\""}),
    [](const ::testing::TestParamInfo<BadPolicy>& info) { return std::to_string(info.index); });

TEST(PolicyParse, GcraRoundingUpToTheBoundIsAccepted) {
  // E * L <= P + P div 1000: every policy whose limit divides the period, and those whose
  // whole-µs spacing slows them by at most 0.1%.
  for (const char* text : {"gcra:7/1m", "gcra:3/1s,burst=7", "gcra:7/13s", "gcra:1000/7s",
                           "gcra:999/1s", "gcra:1001/1s", "gcra:1000000/1s", "gcra:1/1000us",
                           "gcra:10000/1s,burst=1000000000", "sliding_log:100000/1s"}) {
    auto p = Policy::Parse(text);
    EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  }
}

TEST(PolicyValidate, RejectsHandBuiltPoliciesOutOfRange) {
  Policy p;
  p.algorithm = Algorithm::kFixedWindow;
  p.limit = 10;
  p.period = std::chrono::seconds(1);
  EXPECT_TRUE(p.Validate().ok());
  p.burst = 3;
  EXPECT_FALSE(p.Validate().ok());
  p.burst = 0;
  p.period = microseconds(10);
  EXPECT_FALSE(p.Validate().ok());
}

TEST(ParseDuration, AcceptsUnitsRejectsGarbage) {
  EXPECT_EQ(*ParseDuration("50ms"), std::chrono::milliseconds(50));
  EXPECT_EQ(*ParseDuration("s"), std::chrono::seconds(1));
  EXPECT_FALSE(ParseDuration("50").ok());
  EXPECT_FALSE(ParseDuration("-5s").ok());
  EXPECT_FALSE(ParseDuration("5 s").ok());
  const auto fraction = ParseDuration("0.5s");  // says what to do instead
  ASSERT_FALSE(fraction.ok());
  EXPECT_THAT(std::string(fraction.status().message()), ::testing::HasSubstr("500ms"));
}

}  // namespace
}  // namespace floodgate
