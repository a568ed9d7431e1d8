// What a decision script's reply means, checked before it is believed (see decode.h).

#include "store/redis/decode.h"

#include <absl/status/status.h>

#include "core/settle.h"
#include "store/redis/script_layout.h"

namespace floodgate::redis {

namespace {

// A decision reply's fields (layout::kDecisionReply), their range checked. Under delay= the
// allowed field carries + 4 (lua/common.lua delayed), and an allowed answer's retry field its
// delay: an admission has no retry to tell.
Decision DecisionOf(std::int64_t allowed, std::int64_t limit, std::int64_t remaining,
                    std::int64_t retry_after_us, std::int64_t reset_after_us) {
  Decision d;
  d.allowed = (allowed & 1) != 0;
  d.blocked = (allowed & 2) != 0;
  d.delayable = (allowed & 4) != 0;
  d.limit = limit;
  d.remaining = remaining;
  if (d.delayable && d.allowed) {
    d.delay = std::chrono::microseconds(retry_after_us);
  } else {
    d.retry_after = std::chrono::microseconds(retry_after_us);
  }
  d.reset_after = std::chrono::microseconds(reset_after_us);
  return d;
}

}  // namespace

absl::StatusOr<DecodedReply> DecodeDecisions(const redisReply& reply,
                                             std::span<const std::int64_t> limits,
                                             bool with_clock) {
  constexpr std::size_t kFields = layout::kDecisionReply.size();
  const std::size_t expected = limits.size() * kFields + (with_clock ? 1 : 0);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != expected) {
    return absl::InternalError("answered a decision with an unexpected reply");
  }
  DecodedReply decoded;
  if (with_clock) {
    const redisReply* clock = reply.element[expected - 1];
    if (clock->type != REDIS_REPLY_INTEGER || clock->integer < 0) {
      return absl::InternalError("answered a decision with an unexpected reply");
    }
    decoded.clock_us = clock->integer;
  }
  std::vector<absl::StatusOr<Decision>>& decisions = decoded.decisions;
  decisions.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const redisReply* const* e = reply.element + i * kFields;
    bool integers = true;
    for (std::size_t j = 0; j < kFields; ++j) {
      integers = integers && e[j]->type == REDIS_REPLY_INTEGER;
    }
    // Our scripts answer allowed in {0, 1} (+ 2 when the key is blocked, lua/common.lua
    // FG.decide_blocked; + 4 under delay=, FG.delayed), remaining >= 0, retry_after >= -1
    // (-1: never) and reset_after >= 0: anything else is not from them, and must not reach a
    // caller as a decision.
    if (!integers || e[0]->integer < 0 || e[0]->integer > 5 || e[1]->integer < 0 ||
        e[2]->integer < -1 || e[3]->integer < 0) {
      decisions.push_back(absl::InternalError("answered a decision with values out of range"));
      continue;
    }
    decisions.push_back(
        DecisionOf(e[0]->integer, limits[i], e[1]->integer, e[2]->integer, e[3]->integer));
  }
  return decoded;
}

absl::StatusOr<std::vector<absl::StatusOr<std::int64_t>>> DecodeCounts(const redisReply& reply,
                                                                      std::size_t counters) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != counters) {
    return absl::InternalError("answered a counter with an unexpected reply");
  }
  std::vector<absl::StatusOr<std::int64_t>> counts;
  counts.reserve(counters);
  for (std::size_t i = 0; i < counters; ++i) {
    const redisReply& e = *reply.element[i];
    // Another client may have written anything to upstream's key (INCRBY would then have
    // failed the call); a negative count is not one upstream's replicas make.
    if (e.type != REDIS_REPLY_INTEGER || e.integer < 0) {
      counts.push_back(absl::InternalError("answered a counter with a value out of range"));
    } else {
      counts.push_back(e.integer);
    }
  }
  return counts;
}

absl::StatusOr<std::vector<ReservationAnswer>> DecodeReservations(const redisReply& reply,
                                                                  std::size_t operations) {
  constexpr std::size_t kFields = layout::kOperationReply.size();
  const std::size_t expected = operations * kFields + 1;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != expected) {
    return absl::InternalError("answered a reservation with an unexpected reply");
  }
  std::vector<ReservationAnswer> answers;
  answers.reserve(operations);
  for (std::size_t i = 0; i < operations; ++i) {
    const redisReply* const* e = reply.element + i * kFields;
    bool integers = true;
    for (std::size_t j = 0; j < kFields; ++j) {
      integers = integers && e[j]->type == REDIS_REPLY_INTEGER;
    }
    if (integers && e[0]->integer == 0) {
      answers.push_back(
          {absl::NotFoundError("unknown reservation: never made, or settled already, or expired")});
      continue;
    }
    if (integers && e[0]->integer == 2) {
      answers.push_back(
          {absl::NotFoundError("reservation expired (it stays charged at its estimate)")});
      continue;
    }
    if (integers && e[0]->integer == 3) {
      answers.push_back({absl::InvalidArgumentError(core::kLeaseSettledAtACost)});
      continue;
    }
    if (!integers || e[0]->integer != 1 || e[1]->integer < 0 || e[1]->integer > 3 ||
        e[2]->integer < 1 || e[3]->integer < 0 || e[4]->integer < -1 || e[5]->integer < 0 ||
        e[6]->integer < 0) {
      answers.push_back({absl::InternalError("answered a reservation with values out of range")});
      continue;
    }
    Decision d;
    d.allowed = (e[1]->integer & 1) != 0;
    d.blocked = e[1]->integer >= 2;
    d.limit = e[2]->integer;
    d.remaining = e[3]->integer;
    d.retry_after = std::chrono::microseconds(e[4]->integer);
    d.reset_after = std::chrono::microseconds(e[5]->integer);
    answers.push_back({d, e[6]->integer});
  }
  return answers;
}

}  // namespace floodgate::redis
