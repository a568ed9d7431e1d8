// Deciding a request's limits in one place: counting answers and logging degraded ones.

#include "server/decider.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace floodgate::server {

std::uint64_t EverySecond::Count(std::chrono::steady_clock::time_point now) {
  unreported_.fetch_add(1);
  std::int64_t last = last_ns_.load();
  const std::int64_t at = now.time_since_epoch().count();
  if (at - last < 1'000'000'000 || !last_ns_.compare_exchange_strong(last, at)) return 0;
  // Taken whole, as TakeUnreported takes them: each one reported once, by one of the two.
  return unreported_.exchange(0);
}

void Decider::LogDegraded(std::chrono::steady_clock::time_point now) {
  if (const std::uint64_t count = degraded_log_.Count(now)) {
    spdlog::warn("store {} failing: {} decision(s) answered by on_error since the last report",
                 store_->Describe(), count);
  }
}

void Decider::LogRecovered() {
  if (const std::uint64_t count = degraded_log_.TakeUnreported()) {
    spdlog::warn("store {} answers again: {} decision(s) answered by on_error since the last "
                 "report",
                 store_->Describe(), count);
  }
}

void Decider::CountMulti(const RequestLimits& limits, const MultiDecision& decision) {
  const Outcome outcome = decision.degraded  ? Outcome::kDegraded
                          : decision.allowed ? Outcome::kAllowed
                                             : Outcome::kDenied;
  for (const std::string& rule : limits.rules) metrics_.CountDecision(rule, outcome);
  bool blocked = false;  // an enforced limit denied under its block
  for (const std::size_t i : decision.denied_by) blocked = blocked || decision.items[i].blocked;
  if (blocked) {
    for (const std::string& rule : limits.rules) metrics_.CountBlocked(rule);
  }
  for (std::size_t i = 0; i < limits.items.size(); ++i) {
    if (std::find(decision.unknown.begin(), decision.unknown.end(), i) != decision.unknown.end()) {
      continue;
    }
    LimitResult result = LimitResult::kAllowed;
    if (!decision.items[i].allowed) {
      result = limits.items[i].shadow ? LimitResult::kWouldDeny : LimitResult::kDenied;
    } else if (!decision.allowed) {
      result = LimitResult::kDeniedByOther;
    }
    CountLimit(limits, i, result);
    if (result == LimitResult::kWouldDeny) {
      if (const std::uint64_t count = would_deny_log_.Count(std::chrono::steady_clock::now())) {
        spdlog::info(
            "shadow limit {} would have denied this request ({} shadow denial(s) since "
            "the last report); nothing was denied",
            limits.names[i], count);
      }
    }
  }
}

void Decider::CountSingle(const RequestLimits& limits, const Decision& decision) {
  metrics_.CountDecision(limits.rules.front(), decision.degraded  ? Outcome::kDegraded
                                               : decision.allowed ? Outcome::kAllowed
                                                                  : Outcome::kDenied);
  CountLimit(limits, 0, decision.allowed ? LimitResult::kAllowed : LimitResult::kDenied);
  if (!decision.allowed && decision.blocked) metrics_.CountBlocked(limits.rules.front());
}

void Decider::CountLimit(const RequestLimits& limits, std::size_t i, LimitResult result) {
  const std::size_t rule_length = limits.rule_lengths[i];
  if (rule_length == RequestLimits::kNoRule) return;
  const std::string_view name = limits.names[i];
  // "<rule>.<limit>", or a rule's single policy named after the rule.
  metrics_.CountLimit(name.substr(0, rule_length),
                      rule_length == name.size() ? name : name.substr(rule_length + 1), result);
}

}  // namespace floodgate::server
