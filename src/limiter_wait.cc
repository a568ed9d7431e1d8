// Limiter::Wait and WaitAll: a decision under delay=, then the wait it asks (docs/embedding.md).

#include <absl/status/status.h>
#include <floodgate/limiter.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "core/multi.h"
#include "delay_queue.h"

namespace floodgate {

namespace {

using std::chrono::microseconds;
using Steady = std::chrono::steady_clock;

// The policy the store decides: delay= capped by what is left of the deadline. Less than
// kMinDelay left: no wait at all, only a slot free now.
absl::StatusOr<Policy> Bounded(const Policy& policy, Steady::time_point deadline) {
  if (policy.algorithm != Algorithm::kGcra && policy.algorithm != Algorithm::kTokenBucket &&
      policy.algorithm != Algorithm::kSlidingLog) {
    return absl::InvalidArgumentError(
        fmt::format("{}: only gcra, token_bucket and sliding_log can wait for a slot (delay=)",
                    policy.ToString()));
  }
  const auto left = std::chrono::duration_cast<microseconds>(deadline - Steady::now());
  const microseconds cap = policy.delay.count() > 0 ? policy.delay : kMaxDelay;
  Policy bounded = policy;
  bounded.delay = left < kMinDelay ? microseconds(0) : std::min(cap, left);
  return bounded;
}

// The items the store decides: every one that sets the start (core::Schedules) Bounded.
absl::StatusOr<std::vector<CheckItem>> BoundedItems(std::span<const CheckItem> items,
                                                    Steady::time_point deadline) {
  std::vector<CheckItem> bounded(items.begin(), items.end());
  for (std::size_t i = 0; i < bounded.size(); ++i) {
    if (!core::Schedules(bounded[i])) continue;
    absl::StatusOr<Policy> policy = Bounded(bounded[i].policy, deadline);
    if (!policy.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("items[{}]: {}", i, MessageOf(policy.status())));
    }
    bounded[i].policy = *std::move(policy);
  }
  return bounded;
}

// The store's callback for an async wait: hands `done` the answer (a Decision, or a
// MultiDecision for several limits) once its delay has passed on `timers`, at once when it
// has none or is not an admission. The delay runs from when the answer arrives: a store's
// round trip only makes the caller proceed later than its slot, never earlier.
template <typename Answer, typename Done>
auto AfterDelay(DelayQueue* timers, Done done) {
  return [timers, done = std::move(done)](absl::StatusOr<Answer> decision) mutable {
    if (!decision.ok() || !decision->allowed || decision->delay.count() == 0) {
      return done(std::move(decision));
    }
    const std::chrono::microseconds delay = decision->delay;
    timers->At(Steady::now() + delay,
               [answer = *std::move(decision), done = std::move(done)](bool on_time) mutable {
                 if (on_time) return done(std::move(answer));
                 done(absl::CancelledError(
                     "the limiter closed before the delay ended (the request stays charged)"));
               });
  };
}

}  // namespace

absl::StatusOr<Decision> Limiter::Wait(std::string_view key, const Policy& policy,
                                       Steady::time_point deadline, std::int64_t cost) {
  absl::StatusOr<Policy> bounded = Bounded(policy, deadline);
  if (!bounded.ok()) return bounded.status();
  absl::StatusOr<Decision> decision =
      store_->Decide(DecideRequest{key, *bounded, cost, std::nullopt});
  // The point of the sync form: this thread is the waiter.
  if (decision.ok() && decision->allowed) std::this_thread::sleep_for(decision->delay);
  return decision;
}

void Limiter::WaitAsync(std::string_view key, const Policy& policy, Steady::time_point deadline,
                        std::int64_t cost, DecisionCallback done) {
  absl::StatusOr<Policy> bounded = Bounded(policy, deadline);
  if (!bounded.ok()) return done(bounded.status());
  store_->DecideAsync(DecideRequest{key, *bounded, cost, std::nullopt},
                      AfterDelay<Decision>(timers_.get(), std::move(done)));
}

absl::StatusOr<MultiDecision> Limiter::WaitAll(std::span<const CheckItem> items,
                                               Steady::time_point deadline) {
  absl::StatusOr<std::vector<CheckItem>> bounded = BoundedItems(items, deadline);
  if (!bounded.ok()) return bounded.status();
  absl::StatusOr<MultiDecision> decision = store_->DecideAll(MultiRequest{*bounded});
  if (decision.ok() && decision->allowed) std::this_thread::sleep_for(decision->delay);
  return decision;
}

void Limiter::WaitAllAsync(std::span<const CheckItem> items, Steady::time_point deadline,
                           MultiCallback done) {
  absl::StatusOr<std::vector<CheckItem>> bounded = BoundedItems(items, deadline);
  if (!bounded.ok()) return done(bounded.status());
  store_->DecideAllAsync(MultiRequest{*bounded},
                         AfterDelay<MultiDecision>(timers_.get(), std::move(done)));
}

std::future<absl::StatusOr<Decision>> Limiter::WaitFuture(std::string_view key,
                                                          const Policy& policy,
                                                          Steady::time_point deadline,
                                                          std::int64_t cost) {
  std::promise<absl::StatusOr<Decision>> promise;
  std::future<absl::StatusOr<Decision>> future = promise.get_future();
  WaitAsync(key, policy, deadline, cost,
            [promise = std::move(promise)](absl::StatusOr<Decision> decision) mutable {
              promise.set_value(std::move(decision));
            });
  return future;
}

}  // namespace floodgate
