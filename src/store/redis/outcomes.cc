// Answering a unit: Redis's answer or on_error's, with breaker, denial cache and counters.
#include "store/redis/outcomes.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/strings.h"
#include "core/multi.h"
#include "store/redis/node.h"

namespace floodgate::redis {

Outcomes::Outcomes(const RedisStoreOptions& options, Counters& counters)
    : options_(options), counters_(counters), denials_(options.denial_cache_size) {}

std::optional<Decision> Outcomes::CachedDenial(std::string_view redis_key, const Policy& policy,
                                               std::int64_t cost, Steady::time_point now) {
  return denials_.Lookup(redis_key, policy, cost, now);
}

void Outcomes::AnswerWhileOpen(Unit& unit) {
  unit.answered = true;
  if (unit.settles()) {
    return unit.Answer(SettleFailed(absl::UnavailableError("redis circuit breaker open")));
  }
  if (unit.operates()) {
    return unit.Answer(OperateFailed(absl::UnavailableError("redis circuit breaker open")));
  }
  if (unit.grouped()) return unit.AnswerGroup(absl::UnavailableError("redis circuit breaker open"));
  unit.Answer(Fallback(unit));
}

void Outcomes::Complete(Unit& p, absl::StatusOr<Decision> result, Blame blame) {
  if (p.grouped()) return CompleteUnit(p, result.status(), blame);  // an error
  if (p.answered) return;
  p.answered = true;
  const Steady::time_point now = Steady::now();
  // NotFound, InvalidArgument: Redis answered a settle, knowing no such reservation, or
  // a lease settled at a cost (refused, still held).
  if (result.ok() || absl::IsNotFound(result.status()) ||
      (p.settles() && absl::IsInvalidArgument(result.status()))) {
    if (p.route.node != nullptr) p.route.node->breaker.Success();
    // This process's denials of an operated key are stale: a reset or a refund made room.
    if (p.operates()) denials_.Erase(p.item().redis_key);
    if (result.ok() && !p.settles() && !p.counts() && !p.operates()) {
      RememberDenial(p, p.item(), *result, now);
    }
    p.Answer(std::move(result));
    return;
  }
  if (absl::IsCancelled(result.status())) {
    p.Answer(result.status());
    return;
  }
  CountFailure(p, result.status(), now, blame);
  if (p.settles()) return p.Answer(SettleFailed(result.status()));
  if (p.operates()) return p.Answer(OperateFailed(result.status()));
  p.Answer(Fallback(p));
}

absl::Status Outcomes::SettleFailed(const absl::Status& status) {
  return absl::UnavailableError(
      fmt::format("the settle's outcome is unknown ({}): if it did not run, the reservation stays "
                  "charged at its estimate until its hold ends; settling again is safe (a settled "
                  "reservation is not found)",
                  MessageOf(status)));
}

absl::Status Outcomes::OperateFailed(const absl::Status& status) {
  return absl::UnavailableError(fmt::format(
      "the operation's outcome is unknown ({}): a reset may be sent again; a refund or a "
      "penalty sent again may count twice",
      MessageOf(status)));
}

void Outcomes::CompleteUnit(Unit& p, absl::StatusOr<UnitResult> result, Blame blame) {
  if (p.answered) return;
  p.answered = true;
  const Steady::time_point now = Steady::now();
  if (result.ok()) {
    if (p.route.node != nullptr) p.route.node->breaker.Success();
    for (std::size_t i = 0; i < p.items.size(); ++i) {
      RememberDenial(p, p.items[i], result->items[i], now);
    }
  } else if (!absl::IsCancelled(result.status())) {
    CountFailure(p, result.status(), now, blame);
  }
  p.AnswerGroup(std::move(result));
}

// The denial cache learns denials Redis gave at its own clock, long enough to matter;
// never a concurrency limit's, whose retry_after is only an upper bound (a release
// frees a lease sooner, and a cached denial would then refuse what is admitted); nor a
// delay= item's in a multi-decision, denied by the request's allowance (min D_i), which
// a decision of that limit alone, allowed its own D, need not be.
void Outcomes::RememberDenial(const Unit& p, const Item& item, const Decision& d,
                              Steady::time_point now) {
  if (!d.allowed && !p.now_us && options_.denial_cache_min.count() > 0 &&
      d.retry_after >= options_.denial_cache_min &&
      item.policy.algorithm != Algorithm::kConcurrency &&
      (p.items.size() == 1 || item.policy.delay.count() == 0)) {
    denials_.Insert(item.redis_key, item.policy, item.cost, d, now);
  }
}

void Outcomes::CountFailure(Unit& p, const absl::Status& status, Steady::time_point now,
                            Blame blame) {
  counters_.RecordError(status);
  if (absl::IsDeadlineExceeded(status)) ++counters_.timeouts;
  if (blame == Blame::kOwnBacklog) {
    ++counters_.backlog_timeouts;
    return;
  }
  if (p.route.node != nullptr) p.route.node->breaker.Failure(now);
}

Decision Outcomes::OnErrorAnswer(const Policy& policy, std::int64_t cost) const {
  Decision d;
  d.limit = policy.limit;
  d.degraded = true;
  if (options_.on_error == OnError::kFailOpen) {
    d.allowed = true;
    d.remaining = std::max<std::int64_t>(0, policy.capacity() - cost);
  } else {
    // A hint, not a promise: come back after the breaker's open period.
    d.retry_after = std::min<std::chrono::microseconds>(policy.period, options_.breaker_open);
    d.reset_after = d.retry_after;
  }
  return d;
}

std::int64_t Outcomes::CountFallback(const Unit& p, std::int64_t ttl_s) {
  switch (options_.on_error) {
    case OnError::kFailOpen:
      return 0;
    case OnError::kFailClosed:
      return std::numeric_limits<std::int64_t>::max();
    case OnError::kLocal:
      break;
  }
  const Item& item = p.item();
  const CountRequest local{item.redis_key, item.cost, std::chrono::seconds(ttl_s), std::nullopt};
  absl::StatusOr<CountAnswer> counted = local_.Count(local);
  return counted.ok() ? counted->count : std::numeric_limits<std::int64_t>::max();
}

Decision Outcomes::Fallback(Unit& p) {
  ++counters_.degraded;
  if (auto* count = std::get_if<Count>(&p.op)) {
    count->count = CountFallback(p, count->ttl_s);
    Decision d;
    d.degraded = true;
    return d;
  }
  const Item& item = p.item();
  if (options_.on_error != OnError::kLocal) return OnErrorAnswer(item.policy, item.cost);
  DecideRequest local{std::string_view(item.redis_key).substr(item.key_at), item.policy, item.cost,
                      std::nullopt};
  if (p.now_us) local.now = TimePoint(std::chrono::microseconds(*p.now_us));
  Decision d;
  if (absl::StatusOr<Decision> decided = local_.Decide(local); decided.ok()) {
    d = *decided;
  } else {
    d.limit = item.policy.limit;
  }
  d.degraded = true;
  return d;
}

MultiDecision Outcomes::AnswerMulti(std::span<const CheckItem> items,
                                    std::optional<std::int64_t> now_us) {
  ++counters_.degraded;
  MultiDecision answer;
  if (options_.on_error == OnError::kLocal) {
    MultiRequest local{items, std::nullopt};
    if (now_us) local.now = TimePoint(std::chrono::microseconds(*now_us));
    if (auto decided = local_.DecideAll(local); decided.ok()) answer = *std::move(decided);
  }
  if (answer.items.empty()) {  // fail_open, fail_closed
    for (const CheckItem& item : items)
      answer.items.push_back(OnErrorAnswer(item.policy, item.cost));
    answer.allowed = core::MultiAllows(items, answer.items);
    core::Summarize(items, answer);
  }
  answer.degraded = true;
  for (Decision& d : answer.items) d.degraded = true;
  return answer;
}

}  // namespace floodgate::redis
