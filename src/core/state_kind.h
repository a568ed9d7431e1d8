#pragma once

// StateKind: which state layout a policy keeps, and the tag its store keys carry.

#include <floodgate/policy.h>

#include <cstdint>
#include <string_view>

namespace floodgate::core {

// Which state layout a policy keeps. Token bucket's two refill modes store different
// state, so they get different kinds (and key tags): switching a rule's refill mode, like
// switching its algorithm, never reinterprets old state.
enum class StateKind : std::uint8_t {
  kGcra = 1,
  kSmoothBucket,
  kIntervalBucket,
  kSlidingLog,
  kSlidingWindow,
  kFixedWindow,
  // Leases (docs/leases.md): a sliding log of one unit per lease over the lease time. Its
  // own kind, because Redis keeps it as a sorted set of lease ids (lua/concurrency.lua),
  // where a sliding log keeps runs.
  kConcurrency,
};

constexpr StateKind KindOf(const Policy& policy) {
  switch (policy.algorithm) {
    case Algorithm::kGcra:
      return StateKind::kGcra;
    case Algorithm::kTokenBucket:
      return policy.refill == Refill::kInterval ? StateKind::kIntervalBucket
                                                : StateKind::kSmoothBucket;
    case Algorithm::kSlidingLog:
      return StateKind::kSlidingLog;
    case Algorithm::kConcurrency:
      return StateKind::kConcurrency;
    case Algorithm::kSlidingWindow:
      return StateKind::kSlidingWindow;
    case Algorithm::kFixedWindow:
      return StateKind::kFixedWindow;
  }
  return StateKind::kGcra;
}

// The <algorithm-tag> of a store key `<prefix><algorithm-tag>:<key>` (docs/algorithms.md,
// "Store keys"). Short, because Redis keeps one per key.
constexpr std::string_view KeyTag(StateKind kind) {
  switch (kind) {
    case StateKind::kGcra:
      return "gcra";
    case StateKind::kSmoothBucket:
      return "tb";
    case StateKind::kIntervalBucket:
      return "tbi";
    case StateKind::kSlidingLog:
      return "sl";
    case StateKind::kSlidingWindow:
      return "sw";
    case StateKind::kFixedWindow:
      return "fw";
    case StateKind::kConcurrency:
      return "cc";
  }
  return "?";
}

// Whether a kind's state is a sliding log (core::SlidingLog in memory://): a lease is an
// admission of a sliding log over the lease time, decided, released and expired by the
// sliding log's steps (docs/algorithms.md, "sliding_log (exact sliding window)" with
// L = N, P = the lease time).
constexpr bool KeepsLog(StateKind kind) {
  return kind == StateKind::kSlidingLog || kind == StateKind::kConcurrency;
}

}  // namespace floodgate::core
