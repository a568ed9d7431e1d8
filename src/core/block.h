#pragma once

// block=D around any algorithm's decision: the one C++ definition of docs/algorithms.md "Blocks".
//
// The key's state gains blocked_until (0: none). lua/common.lua's with_block is the other
// definition; tests/vectors/blocks.json proves the two agree. Where a store keeps
// blocked_until is its own business, as long as it lives as long as the block (its TTL
// covers blocked_until).

#include <floodgate/decision.h>
#include <floodgate/policy.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace floodgate::core {

// What block=D made of one decision.
struct BlockStep {
  bool charge = true;  // the algorithm's own outcome stands (its writes are made)
  // The key's block after the decision: > now while blocked.
  std::int64_t blocked_until = 0;
  bool started = false;  // this decision started the block: the store saves blocked_until
};

// The answer while `now < blocked_until`, from `decision`, the algorithm's own answer at now
// on the unchanged state (for a request it would allow: its peek's reset, since nothing is
// charged; `would_allow` says which).
inline void AnswerWhileBlocked(std::int64_t blocked_until, std::int64_t now, std::int64_t cost,
                               bool would_allow, Decision& decision) {
  using std::chrono::microseconds;
  const microseconds left(blocked_until - now);
  if (cost > 0) {
    const microseconds r = would_allow ? microseconds(0) : decision.retry_after;
    decision.allowed = false;
    decision.retry_after = r == Decision::kNever ? r : std::max(left, r);
  }
  decision.remaining = 0;
  decision.reset_after = std::max(left, decision.reset_after);
  decision.blocked = true;
}

// Whether the algorithm's own `decision` at cost > 0 starts a block: a denial that some wait
// would admit (retry_after >= 0).
inline bool StartsBlock(std::int64_t cost, const Decision& decision) {
  return cost > 0 && !decision.allowed && decision.retry_after >= std::chrono::microseconds(0);
}

// The answer of the denial that starts a block of `block` µs.
inline void AnswerBlockStart(std::int64_t block, Decision& decision) {
  const std::chrono::microseconds d(block);
  decision.remaining = 0;
  decision.retry_after = std::max(d, decision.retry_after);
  decision.reset_after = std::max(d, decision.reset_after);
  decision.blocked = true;
}

// A decision of `cost` at `now` under block=policy.block on a key blocked until
// `blocked_until`. `evaluate(cost, decision)` decides as the algorithm at now and keeps what
// it would write, writing nothing; when the step says !charge the caller drops it.
template <class Evaluate>
BlockStep DecideWithBlock(const Policy& policy, std::int64_t blocked_until, std::int64_t now,
                          std::int64_t cost, Decision& decision, Evaluate evaluate) {
  BlockStep step;
  if (now < blocked_until) {
    step.blocked_until = blocked_until;
    evaluate(cost, decision);
    const bool would_allow = cost > 0 && decision.allowed;
    if (would_allow) evaluate(0, decision);  // nothing is charged: the state's own reset
    step.charge = cost == 0;                 // a peek's writes (a refill) are invisible
    AnswerWhileBlocked(blocked_until, now, cost, would_allow, decision);
    return step;
  }
  evaluate(cost, decision);
  if (StartsBlock(cost, decision)) {
    step.blocked_until = now + policy.block.count();
    step.started = true;
    AnswerBlockStart(policy.block.count(), decision);
  }
  return step;
}

}  // namespace floodgate::core
