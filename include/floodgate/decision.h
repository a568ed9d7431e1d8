#pragma once

// Decision: what a limiter answers about one request, and its JSON form.

#include <chrono>
#include <cstdint>
#include <string>

namespace floodgate {

// The answer to one request (docs/algorithms.md, "Decision"; docs/service.md, "Decision JSON").
struct Decision {
  // retry_after when the cost can never be admitted under the policy.
  static constexpr std::chrono::microseconds kNever{-1};

  bool allowed = false;
  std::int64_t limit = 0;
  // Cost-1 requests that would be allowed right now, after this decision.
  std::int64_t remaining = 0;
  // 0 when allowed; else the wait until the same request would be allowed, or kNever.
  std::chrono::microseconds retry_after{0};
  // Wait until the key is back to full capacity with no other traffic.
  std::chrono::microseconds reset_after{0};
  // The configured store did not answer; a failure mode (on_error) decided instead.
  bool degraded = false;
  // The key is under a penalty block (Policy::block, docs/algorithms.md "Blocks") after this
  // decision: it was blocked already, or this denial started the block. retry_after and
  // reset_after cover the block; a request with cost > 0 is denied while it lasts.
  bool blocked = false;
  // Decided under delay= (Policy::delay, docs/algorithms.md "Waiting"): `delay` is part of
  // the answer (and of its JSON, as delay_us).
  bool delayable = false;
  // Allowed with a delay: the request was charged as a decision at now + delay and must
  // wait that long before it proceeds. 0 when it may proceed at once (and when denied).
  std::chrono::microseconds delay{0};

  friend bool operator==(const Decision&, const Decision&) = default;
};

// One Decision as the JSON object of docs/service.md, e.g.
// {"allowed":true,"limit":10,"remaining":9,"retry_after_us":0,"reset_after_us":100000}
std::string ToJson(const Decision& decision);

}  // namespace floodgate
