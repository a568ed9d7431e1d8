// How the Redis store answers a unit, without a server: the on_error x unit-mode table.
//
// Also the breaker, the denial cache and the counters.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/multi.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"

namespace floodgate::redis {
namespace {

Policy Gcra(std::int64_t limit) {
  Policy policy;
  policy.limit = limit;
  policy.period = std::chrono::seconds(10);
  return policy;
}

// The table's operations (unit.h): a single decision, a multi-decision's group, a
// reservation's reserve and settle.
enum class Op { kSingle, kAll, kDry, kRelease, kReserve, kSettle };

// A unit of `op` on one key, whose answer lands in `decision` or `unit_result`.
struct Probe {
  explicit Probe(Op op, std::optional<std::int64_t> now_us = {}) {
    const auto decided = [this](absl::StatusOr<Decision> d) { decision = std::move(d); };
    const auto grouped = [this](absl::StatusOr<UnitResult> r) { unit_result = std::move(r); };
    switch (op) {
      case Op::kSingle:
        unit.op = Decide{decided};
        break;
      case Op::kAll:
        unit.op = MultiAll{.done = grouped};
        break;
      case Op::kDry:
        unit.op = MultiDry{grouped};
        break;
      case Op::kRelease:
        unit.op = MultiRelease{.done = grouped};
        break;
      case Op::kReserve:
        unit.op = Reserve{.done = decided};
        break;
      case Op::kSettle:
        unit.op = Settle{decided};
        break;
    }
    unit.now_us = now_us;
    const std::string redis_key = "fg:gcra:k";
    unit.items.push_back(Item{redis_key, redis_key.size() - 1, Gcra(4), 1, core::StateKind::kGcra});
  }
  Unit unit;
  std::optional<absl::StatusOr<Decision>> decision;
  std::optional<absl::StatusOr<UnitResult>> unit_result;
};

class RedisOutcomes : public ::testing::TestWithParam<OnError> {
 protected:
  RedisOutcomes() : node_({"h", 1}, "h:1", /*threshold=*/1, std::chrono::seconds(1)) {
    options_.on_error = GetParam();
    options_.breaker_open = std::chrono::milliseconds(250);
  }
  RedisStoreOptions options_;
  Counters counters_;
  Node node_;
};

// What on_error says for a decision Redis could not give (docs/service.md, "Failure modes").
void ExpectOnErrorAnswer(OnError on_error, const Decision& d) {
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.limit, 4);
  switch (on_error) {
    case OnError::kFailOpen:
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.remaining, 3);
      break;
    case OnError::kFailClosed:
      EXPECT_FALSE(d.allowed);
      EXPECT_EQ(d.retry_after, std::chrono::milliseconds(250));  // the breaker's open period
      EXPECT_EQ(d.reset_after, std::chrono::milliseconds(250));
      break;
    case OnError::kLocal:  // decided in process: a fresh key admits
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.remaining, 3);
      break;
  }
}

TEST_P(RedisOutcomes, FailedDecisionsAreAnsweredByOnError) {
  for (Op mode : {Op::kSingle, Op::kReserve}) {
    Outcomes outcomes(options_, counters_);
    Probe probe(mode);
    probe.unit.route.node = &node_;
    outcomes.Complete(probe.unit, absl::DeadlineExceededError("slow"));
    ASSERT_TRUE(probe.decision.has_value());
    ASSERT_TRUE(probe.decision->ok()) << probe.decision->status();
    ExpectOnErrorAnswer(GetParam(), **probe.decision);
    EXPECT_TRUE(node_.breaker.open(Steady::now()));  // threshold 1: the failure opened it
    node_.breaker.Success();
  }
  EXPECT_EQ(counters_.errors, 2u);
  EXPECT_EQ(counters_.timeouts, 2u);
  EXPECT_EQ(counters_.degraded, 2u);
}

TEST_P(RedisOutcomes, BreakerRefusalsAreAnsweredByOnErrorWithoutCountingAFailure) {
  Outcomes outcomes(options_, counters_);
  Probe probe(Op::kSingle);
  probe.unit.route.node = &node_;
  outcomes.AnswerWhileOpen(probe.unit);
  ASSERT_TRUE(probe.decision.has_value() && probe.decision->ok());
  ExpectOnErrorAnswer(GetParam(), **probe.decision);
  EXPECT_FALSE(node_.breaker.open(Steady::now()));
  EXPECT_EQ(counters_.errors, 0u);
  EXPECT_EQ(counters_.degraded, 1u);
}

TEST_P(RedisOutcomes, AFailedSettleIsNeverDecidedByOnError) {
  Outcomes outcomes(options_, counters_);
  Probe failed(Op::kSettle);
  outcomes.Complete(failed.unit, absl::UnavailableError("gone"));
  ASSERT_TRUE(failed.decision.has_value());
  EXPECT_TRUE(absl::IsUnavailable(failed.decision->status()));
  EXPECT_NE(failed.decision->status().message().find("the settle's outcome is unknown (gone)"),
            std::string::npos);
  Probe refused(Op::kSettle);
  outcomes.AnswerWhileOpen(refused.unit);
  ASSERT_TRUE(refused.decision.has_value());
  EXPECT_TRUE(absl::IsUnavailable(refused.decision->status()));
  EXPECT_EQ(counters_.degraded, 0u);
  EXPECT_EQ(counters_.errors, 1u);
}

TEST_P(RedisOutcomes, RedisAnswersThatSettleNothingAreNotFailures) {
  Outcomes outcomes(options_, counters_);
  for (absl::Status status :
       {absl::NotFoundError("no such reservation"), absl::InvalidArgumentError("a lease")}) {
    Probe probe(Op::kSettle);
    probe.unit.route.node = &node_;
    outcomes.Complete(probe.unit, status);
    ASSERT_TRUE(probe.decision.has_value());
    EXPECT_EQ(probe.decision->status(), status);
  }
  EXPECT_FALSE(node_.breaker.open(Steady::now()));
  EXPECT_EQ(counters_.errors, 0u);
}

TEST_P(RedisOutcomes, GroupsHandTheirFailureToTheMultiDecision) {
  for (Op mode : {Op::kAll, Op::kDry, Op::kRelease}) {
    Outcomes outcomes(options_, counters_);
    Probe failed(mode);
    outcomes.Complete(failed.unit, absl::UnavailableError("down"));
    ASSERT_TRUE(failed.unit_result.has_value());
    EXPECT_TRUE(absl::IsUnavailable(failed.unit_result->status()));
    EXPECT_FALSE(failed.decision.has_value());
    Probe refused(mode);
    outcomes.AnswerWhileOpen(refused.unit);
    ASSERT_TRUE(refused.unit_result.has_value());
    EXPECT_TRUE(absl::IsUnavailable(refused.unit_result->status()));
  }
  EXPECT_EQ(counters_.errors, 3u);
  EXPECT_EQ(counters_.degraded, 0u);  // the multi-decision's answer counts it
}

TEST_P(RedisOutcomes, AFailedMultiDecisionIsAnsweredByOnError) {
  Outcomes outcomes(options_, counters_);
  std::vector<CheckItem> items(2);
  items[0].key = "a";
  items[0].policy = Gcra(4);
  items[1].key = "b";
  items[1].policy = Gcra(4);
  const MultiDecision answer = outcomes.AnswerMulti(items, std::nullopt);
  EXPECT_TRUE(answer.degraded);
  ASSERT_EQ(answer.items.size(), 2u);
  for (const Decision& d : answer.items) ExpectOnErrorAnswer(GetParam(), d);
  EXPECT_EQ(answer.allowed, GetParam() != OnError::kFailClosed);
  EXPECT_EQ(counters_.degraded, 1u);
}

TEST_P(RedisOutcomes, CancelledUnitsAreNeitherFailuresNorDegraded) {
  Outcomes outcomes(options_, counters_);
  Probe single(Op::kSingle);
  single.unit.route.node = &node_;
  outcomes.Complete(single.unit, absl::CancelledError("store closed"));
  ASSERT_TRUE(single.decision.has_value());
  EXPECT_TRUE(absl::IsCancelled(single.decision->status()));
  Probe group(Op::kAll);
  outcomes.Complete(group.unit, absl::CancelledError("store closed"));
  ASSERT_TRUE(group.unit_result.has_value());
  EXPECT_TRUE(absl::IsCancelled(group.unit_result->status()));
  EXPECT_EQ(counters_.errors, 0u);
  EXPECT_EQ(counters_.degraded, 0u);
  EXPECT_FALSE(node_.breaker.open(Steady::now()));
}

TEST_P(RedisOutcomes, AUnitIsAnsweredOnce) {
  Outcomes outcomes(options_, counters_);
  Probe probe(Op::kSingle);
  Decision first;
  first.allowed = true;
  first.limit = 4;
  outcomes.Complete(probe.unit, first);
  outcomes.Complete(probe.unit, absl::DeadlineExceededError("late"));
  ASSERT_TRUE(probe.decision.has_value() && probe.decision->ok());
  EXPECT_EQ(**probe.decision, first);
  EXPECT_EQ(counters_.errors, 0u);
}

TEST_P(RedisOutcomes, DenialsAtTheServersClockAreRemembered) {
  Outcomes outcomes(options_, counters_);
  Decision denied;
  denied.limit = 4;
  denied.retry_after = std::chrono::seconds(2);
  Probe at_caller_clock(Op::kSingle, /*now_us=*/5);
  outcomes.Complete(at_caller_clock.unit, denied);
  const Steady::time_point now = Steady::now();
  EXPECT_FALSE(outcomes.CachedDenial("fg:gcra:k", Gcra(4), 1, now).has_value());
  Probe at_server_clock(Op::kSingle);
  outcomes.Complete(at_server_clock.unit, denied);
  auto cached = outcomes.CachedDenial("fg:gcra:k", Gcra(4), 1, now);
  ASSERT_TRUE(cached.has_value());
  EXPECT_FALSE(cached->allowed);
}

INSTANTIATE_TEST_SUITE_P(OnError, RedisOutcomes,
                         ::testing::Values(OnError::kFailOpen, OnError::kFailClosed, OnError::kLocal),
                         [](const ::testing::TestParamInfo<OnError>& info) -> std::string {
                           switch (info.param) {
                             case OnError::kFailOpen:
                               return "FailOpen";
                             case OnError::kFailClosed:
                               return "FailClosed";
                             case OnError::kLocal:
                               break;
                           }
                           return "Local";
                         });

}  // namespace
}  // namespace floodgate::redis
