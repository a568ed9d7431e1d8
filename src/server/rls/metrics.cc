// The rate limit service's counters (a lock-free table of series) and their Prometheus text.

#include "server/rls/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/strings.h"

namespace floodgate::server::rls {

namespace {

constexpr std::array<std::string_view, RlsMetrics::kCounterCount> kNames = {
    "total_hits",   "over_limit",      "near_limit",
    "within_limit", "shadow_mode",     "over_limit_with_local_cache",
    "degraded",     "domain_not_found"};
constexpr std::array<std::string_view, RlsMetrics::kCounterCount> kHelp = {
    "Hits asked of each RLS limit (its stats key).",
    "Hits of each RLS limit over the limit.",
    "Hits of each RLS limit between the near-limit threshold and the limit.",
    "Hits of each RLS limit answered OK.",
    "Hits of each shadow RLS limit that were over the limit (answered OK).",
    "Hits of each RLS limit denied by the local over-limit cache.",
    "Hits of each RLS limit answered by the store's on_error.",
    "Descriptors asked of each domain no config has (the key is the domain)."};

// The payload that marks a failed answer as the store's (upstream's redis_error).
constexpr std::string_view kStorePayload = "floodgate.rls/store";

}  // namespace

std::string PrometheusLabelValue(std::string_view text) {
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

struct RlsMetrics::Series {
  explicit Series(std::string_view text) : name(text) {}
  const std::string name;
  std::array<std::atomic<std::uint64_t>, kCounterCount> counts{};
};

std::string_view RlsMetrics::CounterName(Counter counter) { return kNames[counter]; }

RlsMetrics::RlsMetrics(float near_limit_ratio)
    : near_limit_ratio_(near_limit_ratio),
      slots_(std::make_unique<std::atomic<Series*>[]>(kSlots)),
      times_(std::make_unique<std::atomic<std::uint64_t>[]>(kTimeBuckets)) {}

RlsMetrics::~RlsMetrics() {
  for (std::size_t i = 0; i < kSlots; ++i) std::unique_ptr<Series>(slots_[i].load());
}

RlsMetrics::Series* RlsMetrics::Find(std::string_view name) const {
  for (std::size_t i = std::hash<std::string_view>{}(name) & (kSlots - 1);;
       i = (i + 1) & (kSlots - 1)) {
    Series* series = slots_[i].load(std::memory_order_acquire);
    if (series == nullptr || series->name == name) return series;
  }
}

RlsMetrics::Series* RlsMetrics::FindOrInsert(std::string_view name) {
  name = name.substr(0, kMaxNameBytes);
  if (Series* found = Find(name)) return found;
  // A place is taken before the insert, so that racing inserts never pass the bound; every
  // name past it is counted as one series (which takes the one place kept for it).
  if (size_.fetch_add(1, std::memory_order_relaxed) >= kMaxSeries && name != kOtherSeries) {
    size_.fetch_sub(1, std::memory_order_relaxed);
    if (Series* other = Find(kOtherSeries)) return other;
    name = kOtherSeries;
    size_.fetch_add(1, std::memory_order_relaxed);
  }
  auto fresh = std::make_unique<Series>(name);
  for (std::size_t i = std::hash<std::string_view>{}(name) & (kSlots - 1);;
       i = (i + 1) & (kSlots - 1)) {
    Series* seen = nullptr;
    if (slots_[i].compare_exchange_strong(seen, fresh.get(), std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      return fresh.release();
    }
    if (seen->name == name) {  // another thread inserted it first
      size_.fetch_sub(1, std::memory_order_relaxed);
      return seen;
    }
  }
}

void RlsMetrics::Add(std::string_view stats_key, Counter counter, std::uint64_t hits) {
  FindOrInsert(stats_key)->counts[counter].fetch_add(hits, std::memory_order_relaxed);
}

void RlsMetrics::Count(std::string_view stats_key, const Outcome& outcome) {
  Series& series = *FindOrInsert(stats_key);
  const auto add = [&](Counter counter, std::uint64_t n) {
    if (n > 0) series.counts[counter].fetch_add(n, std::memory_order_relaxed);
  };
  const std::uint64_t hits = outcome.hits;
  add(kTotalHits, hits);
  if (outcome.degraded) add(kDegraded, hits);
  // base_limiter.go: the thresholds, and which part of the hits fell past each.
  const std::uint64_t limit = outcome.limit;
  const auto near = static_cast<std::uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * near_limit_ratio_)));
  const std::uint64_t before = outcome.before;
  const std::uint64_t after = before + hits;
  std::uint64_t over = 0;
  if (outcome.local_cache) {
    over = hits;
    add(kOverLimitWithLocalCache, hits);
  } else if (outcome.over) {
    over = before >= limit ? hits : after - limit;
    if (before < limit) add(kNearLimit, limit - std::max(near, before));
  } else if (after > near) {
    add(kNearLimit, before >= near ? hits : after - near);
  }
  if (outcome.over || outcome.local_cache) {
    add(kOverLimit, outcome.local_cache ? hits : over);
    if (outcome.shadow) add(kShadowMode, over);
  } else {
    add(kWithinLimit, hits);
  }
}

std::uint64_t RlsMetrics::Get(std::string_view stats_key, Counter counter) const {
  const Series* series = Find(stats_key.substr(0, kMaxNameBytes));
  return series == nullptr ? 0 : series->counts[counter].load(std::memory_order_relaxed);
}

std::size_t RlsMetrics::series() const { return size_.load(std::memory_order_relaxed); }

void RlsMetrics::CountFailure(const absl::Status& status) {
  if (status.ok()) return;
  CountService(status.GetPayload(ToAbsl(kStorePayload)).has_value() ? kRedisError : kServiceError);
}

absl::Status RlsMetrics::MarkStoreFailure(absl::Status status) {
  status.SetPayload(ToAbsl(kStorePayload), absl::Cord("1"));
  return status;
}

void RlsMetrics::CountResponseTime(std::chrono::nanoseconds elapsed) {
  // Go's Duration.Milliseconds(): truncated.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  const auto bucket = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(std::max<std::int64_t>(ms, 0)), kTimeBuckets - 1);
  times_[bucket].fetch_add(1, std::memory_order_relaxed);
}

void RlsMetrics::DrainResponseTimes(
    const std::function<void(std::uint64_t ms, std::uint64_t n)>& each) {
  for (std::size_t ms = 0; ms < kTimeBuckets; ++ms) {
    if (times_[ms].load(std::memory_order_relaxed) == 0) continue;
    if (const std::uint64_t n = times_[ms].exchange(0, std::memory_order_relaxed)) each(ms, n);
  }
}

void RlsMetrics::ForEach(
    const std::function<void(std::string_view name, const Values&)>& each) const {
  for (std::size_t i = 0; i < kSlots; ++i) {
    const Series* series = slots_[i].load(std::memory_order_acquire);
    if (series == nullptr) continue;
    Values values{};
    for (std::size_t c = 0; c < kCounterCount; ++c) {
      values[c] = series->counts[c].load(std::memory_order_relaxed);
    }
    each(series->name, values);
  }
}

std::string RlsMetrics::Render() const {
  std::vector<std::pair<std::string, Values>> rows;
  ForEach([&](std::string_view name, const Values& values) { rows.emplace_back(name, values); });
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    out += fmt::format("# HELP floodgate_rls_{}_total {}\n# TYPE floodgate_rls_{}_total counter\n",
                       kNames[i], kHelp[i], kNames[i]);
    for (const auto& [key, values] : rows) {
      out += fmt::format("floodgate_rls_{}_total{{key=\"{}\"}} {}\n", kNames[i],
                         PrometheusLabelValue(key), values[i]);
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
