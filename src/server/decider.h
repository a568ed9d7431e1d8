#pragma once

// Deciding a request's limits, in one place for every endpoint.
//
// One decision or all at once, the store's latency, counting in the metrics, the degraded and
// shadow logs.

#include <floodgate/store.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <variant>

#include "server/metrics.h"
#include "server/request_limits.h"

namespace floodgate::server {

// Counts events and says when to report them: at most once a second, with how many
// there were since the last report. Thread-safe.
class EverySecond {
 public:
  // Counts one; returns the count to report now, or 0 (the last report is too recent).
  std::uint64_t Count(std::chrono::steady_clock::time_point now);
  // The counted ones not reported yet, taken (0: none). A relaxed load when there are none:
  // called on every healthy answer, so that a burst's last second is reported when it ends.
  std::uint64_t TakeUnreported() {
    if (unreported_.load(std::memory_order_relaxed) == 0) return 0;
    return unreported_.exchange(0);
  }

 private:
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::uint64_t> unreported_{0};
};

// What a request's limits decided: a Decision when they were one enforced limit holding
// nothing (RequestLimits::single()), else a MultiDecision.
struct LimitsDecision {
  std::variant<Decision, MultiDecision> answer;

  const Decision* single() const { return std::get_if<Decision>(&answer); }
  const MultiDecision* multi() const { return std::get_if<MultiDecision>(&answer); }
  bool allowed() const { return single() != nullptr ? single()->allowed : multi()->allowed; }
  // How long an admitted request waits before it proceeds (delay=, docs/http.md "Waiting"):
  // several limits wait for their common start (MultiDecision::delay). 0 when denied.
  std::chrono::microseconds delay() const {
    return single() != nullptr ? single()->delay : multi()->delay;
  }
};

// Thread-safe.
class Decider {
 public:
  Decider(std::shared_ptr<Store> store, Metrics& metrics)
      : store_(std::move(store)), answers_inline_(store_->AnswersInline()), metrics_(metrics) {}

  Store& store() const { return *store_; }
  Metrics& metrics() const { return metrics_; }

  // Seals `limits` and decides them: with one decision when single(), else all at once.
  // Counts the answer in the metrics, then calls done(limits, StatusOr<LimitsDecision>),
  // inline or later on the store's thread.
  template <class Done>
  void DecideLimits(std::shared_ptr<RequestLimits> limits, Done done);

  // Counts the answer to a single limit (limits.items[0]) or to all of them.
  void CountSingle(const RequestLimits& limits, const Decision& decision);
  void CountMulti(const RequestLimits& limits, const MultiDecision& decision);

 private:
  // A single decision with the store's latency observed and a degraded answer logged;
  // calls `done` (inline, or later on the store's thread). Counts nothing.
  template <class Done>
  void Decide(std::string_view key, const Policy& policy, std::int64_t cost, Done done);
  // The same, for all of `limits` at once.
  template <class Done>
  void DecideAll(const RequestLimits& limits, Done done);
  // Item i's limit in floodgate_limit_decisions_total, unless it came from no rule.
  void CountLimit(const RequestLimits& limits, std::size_t i, LimitResult result);
  void LogDegraded(std::chrono::steady_clock::time_point now);
  // A healthy answer after degraded ones not reported yet (the last second of a burst):
  // they are logged now, so the log's counts add up to the metrics'.
  void LogRecovered();
  // `done` wrapped to observe the store's latency from now and log a degraded answer.
  template <class Answer, class Done>
  auto Observed(Done done);

  std::shared_ptr<Store> store_;
  const bool answers_inline_;  // memory://: no asynchronous hand-off needed
  Metrics& metrics_;
  // Degraded answers and shadow denials are logged at most once a second, with how many
  // there were.
  EverySecond degraded_log_;
  EverySecond would_deny_log_;
};

template <class Done>
void Decider::DecideLimits(std::shared_ptr<RequestLimits> limits, Done done) {
  limits->Seal();
  RequestLimits& sealed = *limits;
  if (sealed.single()) {
    const CheckItem& item = sealed.items.front();
    return Decide(item.key, item.policy, item.cost,
                  [this, limits = std::move(limits),
                   done = std::move(done)](absl::StatusOr<Decision> decision) mutable {
                    if (!decision.ok()) return done(*limits, decision.status());
                    CountSingle(*limits, *decision);
                    done(*limits, LimitsDecision{std::move(*decision)});
                  });
  }
  // The store validates the items (ValidateMultiRequest) and answers a bad request as an
  // error.
  DecideAll(sealed, [this, limits = std::move(limits),
                     done = std::move(done)](absl::StatusOr<MultiDecision> decision) mutable {
    if (!decision.ok()) return done(*limits, decision.status());
    CountMulti(*limits, *decision);
    done(*limits, LimitsDecision{std::move(*decision)});
  });
}

template <class Answer, class Done>
auto Decider::Observed(Done done) {
  return [this, begin = std::chrono::steady_clock::now(),
          done = std::move(done)](absl::StatusOr<Answer> answer) mutable {
    const auto now = std::chrono::steady_clock::now();
    metrics_.ObserveStoreLatency(now - begin);
    if (answer.ok()) answer->degraded ? LogDegraded(now) : LogRecovered();
    done(std::move(answer));
  };
}

template <class Done>
void Decider::Decide(std::string_view key, const Policy& policy, std::int64_t cost, Done done) {
  auto finish = Observed<Decision>(std::move(done));
  // A store that answers inline is called directly: wrapping the continuation for an
  // asynchronous hand-off would cost an allocation per request for nothing.
  if (answers_inline_) return finish(store_->Decide({key, policy, cost, std::nullopt}));
  store_->DecideAsync({key, policy, cost, std::nullopt}, std::move(finish));
}

template <class Done>
void Decider::DecideAll(const RequestLimits& limits, Done done) {
  auto finish = Observed<MultiDecision>(std::move(done));
  const MultiRequest request{limits.items, std::nullopt};
  if (answers_inline_) return finish(store_->DecideAll(request));
  store_->DecideAllAsync(request, std::move(finish));
}

}  // namespace floodgate::server
