// The counts of a replay, per key up to a bound, and the summary printed at its end.

#include "cli/replay_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/strings.h"

namespace floodgate::cli {

void ReplaySummary::Add(std::string_view key, const Decision& decision, std::int64_t t) {
  if (allowed_ + denied_ == 0) first_t_ = t;
  last_t_ = t;
  (decision.allowed ? allowed_ : denied_)++;
  if (decision.degraded) ++degraded_;
  if (decision.allowed && decision.delay.count() > 0) {
    ++delayed_;
    delay_sum_us_ += decision.delay.count();
    delay_max_us_ = std::max(delay_max_us_, decision.delay.count());
  }
  auto it = keys_.find(ToAbsl(key));
  if (it == keys_.end()) {
    if (keys_.size() >= kMaxTrackedKeys) {
      ++untracked_requests_;
      return;
    }
    it = keys_.emplace(key, KeyCounts{}).first;
  }
  ++it->second.requests;
  if (!decision.allowed) ++it->second.denied;
}

std::string ReplaySummary::Render(std::string_view policy, std::size_t top, double seconds) const {
  const std::uint64_t total = allowed_ + denied_;
  const auto pct = [total](std::uint64_t n) { return total == 0 ? 0.0 : 100.0 * n / total; };
  std::string out = fmt::format(
      "replayed {} requests over {} keys in {:.2f} s ({:.0f} requests/s)\n"
      "  policy     {}\n"
      "  allowed    {} ({:.2f}%)\n"
      "  denied     {} ({:.2f}%)\n"
      "  trace span {:.3f} s\n",
      total, keys_.size(), seconds, seconds > 0 ? total / seconds : 0.0, policy, allowed_,
      pct(allowed_), denied_, pct(denied_), (last_t_ - first_t_) / 1e6);
  if (delayed_ > 0) {
    out += fmt::format("  delayed    {} of the allowed (mean {:.3f} ms, max {:.3f} ms)\n", delayed_,
                       delay_sum_us_ / 1e3 / static_cast<double>(delayed_), delay_max_us_ / 1e3);
  }
  if (degraded_ > 0) out += fmt::format("  degraded   {}\n", degraded_);
  if (untracked_requests_ > 0) {
    out += fmt::format(
        "  note: only the first {} distinct keys are tracked per key; {} requests of later "
        "keys count in the totals only\n",
        kMaxTrackedKeys, untracked_requests_);
  }

  std::vector<std::pair<std::string_view, KeyCounts>> offenders;
  for (const auto& [key, counts] : keys_) {
    if (counts.denied > 0) offenders.emplace_back(key, counts);
  }
  const std::size_t shown = std::min(top, offenders.size());
  std::partial_sort(offenders.begin(), offenders.begin() + shown, offenders.end(),
                    [](const auto& a, const auto& b) {
                      if (a.second.denied != b.second.denied)
                        return a.second.denied > b.second.denied;
                      return a.first < b.first;
                    });
  if (shown == 0) {
    out += "no key was denied\n";
    return out;
  }
  out += fmt::format("top {} denied keys ({} keys had denials):\n", shown, offenders.size());
  out += fmt::format("  {:>12}  {:>12}  {:>7}  {}\n", "denied", "requests", "denied%", "key");
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& [key, counts] = offenders[i];
    std::string printable;
    for (char c : key.substr(0, 80)) printable += (c >= 0x20 && c < 0x7f) ? c : '?';
    if (key.size() > 80) printable += "...";
    out += fmt::format("  {:>12}  {:>12}  {:>6.1f}%  {}\n", counts.denied, counts.requests,
                       100.0 * counts.denied / counts.requests, printable);
  }
  return out;
}

}  // namespace floodgate::cli
