// The rate limit service's counters and their Prometheus text.

#include "server/rls/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/strings.h"

namespace floodgate::server::rls {

namespace {

constexpr std::array<std::string_view, RlsMetrics::kCounterCount> kNames = {
    "total_hits", "over_limit", "within_limit", "shadow_mode", "degraded", "near_limit",
    "over_limit_with_local_cache"};
constexpr std::array<std::string_view, RlsMetrics::kCounterCount> kHelp = {
    "Hits asked of each RLS limit (its stats key).", "Hits of each RLS limit answered OVER_LIMIT.",
    "Hits of each RLS limit answered OK.",
    "Hits of each shadow RLS limit that were over the limit (answered OK).",
    "Hits of each RLS limit answered by the store's on_error.",
    "Hits of each RLS limit past NEAR_LIMIT_RATIO of it (upstream's counters).",
    "Hits of each RLS limit answered OVER_LIMIT from the local cache, without the store."};

// A Prometheus label value: backslash, quote and newline escaped.
std::string LabelValue(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void RlsMetrics::Add(std::string_view stats_key, Counter counter, std::uint64_t hits) {
  stats_key = stats_key.substr(0, kMaxNameBytes);
  {
    std::shared_lock lock(mu_);
    if (auto it = by_key_.find(ToAbsl(stats_key)); it != by_key_.end()) {
      (*it->second)[counter].fetch_add(hits, std::memory_order_relaxed);
      return;
    }
  }
  std::unique_lock lock(mu_);
  if (by_key_.size() >= kMaxSeries && !by_key_.contains(ToAbsl(stats_key))) {
    stats_key = kOtherSeries;  // every name past the bound, as one series
  }
  auto& counters = by_key_[std::string(stats_key)];
  if (counters == nullptr) counters = std::make_unique<Counters>();
  (*counters)[counter].fetch_add(hits, std::memory_order_relaxed);
}

std::uint64_t RlsMetrics::Get(std::string_view stats_key, Counter counter) const {
  stats_key = stats_key.substr(0, kMaxNameBytes);
  std::shared_lock lock(mu_);
  const auto it = by_key_.find(ToAbsl(stats_key));
  return it == by_key_.end() ? 0 : (*it->second)[counter].load(std::memory_order_relaxed);
}

std::size_t RlsMetrics::series() const {
  std::shared_lock lock(mu_);
  return by_key_.size();
}

std::string RlsMetrics::Render() const {
  std::vector<std::pair<std::string, std::array<std::uint64_t, kCounterCount>>> rows;
  {
    std::shared_lock lock(mu_);
    rows.reserve(by_key_.size());
    for (const auto& [key, counters] : by_key_) {
      std::array<std::uint64_t, kCounterCount> values{};
      for (std::size_t i = 0; i < kCounterCount; ++i) {
        values[i] = (*counters)[i].load(std::memory_order_relaxed);
      }
      rows.emplace_back(key, values);
    }
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    out += fmt::format("# HELP floodgate_rls_{}_total {}\n# TYPE floodgate_rls_{}_total counter\n",
                       kNames[i], kHelp[i], kNames[i]);
    for (const auto& [key, values] : rows) {
      out += fmt::format("floodgate_rls_{}_total{{key=\"{}\"}} {}\n", kNames[i], LabelValue(key),
                         values[i]);
    }
  }
  out +=
      "# HELP floodgate_rls_global_shadow_mode_total Requests SHADOW_MODE answered OK although "
      "over a limit.\n"
      "# TYPE floodgate_rls_global_shadow_mode_total counter\n";
  out += fmt::format("floodgate_rls_global_shadow_mode_total {}\n", global_shadow());
  return out;
}

}  // namespace floodgate::server::rls
