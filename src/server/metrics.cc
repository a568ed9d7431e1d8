// The service's Prometheus metrics: counters by rule and limit, latency, the exposition text.

#include "server/metrics.h"

#include <floodgate/version.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/strings.h"

namespace floodgate::server {

Metrics::Metrics()
    : id_([] {
        static std::atomic<std::uint64_t> next{1};
        return next.fetch_add(1);
      }()) {}

// A request counts its rules and each of its limits: every thread remembers the counters
// it used last, so that counting skips the lock and the lookup. Counters are never freed
// while their Metrics lives, and `owner` tells one Metrics' entries from another's.
template <class Counters>
Counters& Metrics::Find(absl::flat_hash_map<std::string, std::unique_ptr<Counters>>& family,
                        std::string_view rule, std::string_view limit) {
  struct Recent {
    std::uint64_t owner = 0;
    const void* family = nullptr;
    std::string rule, limit;
    void* counters = nullptr;
  };
  static constexpr std::size_t kRecent = 16;
  thread_local std::array<Recent, kRecent> recent;
  thread_local std::size_t next = 0;
  for (const Recent& r : recent) {
    if (r.owner == id_ && r.family == &family && r.rule == rule && r.limit == limit) {
      return *static_cast<Counters*>(r.counters);
    }
  }
  std::string label(rule);
  if (!limit.empty()) label.append(" ").append(limit);
  Counters* counters = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = family.find(label);
    if (it == family.end()) it = family.emplace(label, std::make_unique<Counters>()).first;
    counters = it->second.get();
  }
  recent[next++ % kRecent] = {id_, &family, std::string(rule), std::string(limit), counters};
  return *counters;
}

void Metrics::CountDecision(std::string_view rule, Outcome outcome) {
  Find(rules_, rule, {})
      .outcomes[static_cast<int>(outcome)]
      .fetch_add(1, std::memory_order_relaxed);
}

void Metrics::CountOperation(std::string_view rule, KeyOperation operation) {
  Find(operations_, rule, {})
      .operations[static_cast<int>(operation)]
      .fetch_add(1, std::memory_order_relaxed);
}

void Metrics::CountBlocked(std::string_view rule) {
  Find(rules_, rule, {}).blocked.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::CountLimit(std::string_view rule, std::string_view limit, LimitResult result) {
  Find(limits_, rule, limit)
      .results[static_cast<int>(result)]
      .fetch_add(1, std::memory_order_relaxed);
}

void Metrics::ObserveStoreLatency(std::chrono::nanoseconds took) {
  const double seconds = std::chrono::duration<double>(took).count();
  const auto bucket =
      std::lower_bound(kBuckets.begin(), kBuckets.end(), seconds) - kBuckets.begin();
  latency_[bucket].fetch_add(1, std::memory_order_relaxed);
  latency_count_.fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns_.fetch_add(took.count(), std::memory_order_relaxed);
}

void Metrics::CountHttp(int status) {
  const int klass = status >= 100 && status < 600 ? status / 100 - 1 : 5;
  http_[klass].fetch_add(1, std::memory_order_relaxed);
}

std::string Metrics::Render(Store& store) const {
  std::string out;
  const auto escape = [](std::string_view label) {
    std::string e;
    for (char c : label) {
      if (c == '\\' || c == '"') e += '\\';
      e += c == '\n' ? 'n' : c;
    }
    return e;
  };
  out +=
      "# HELP floodgate_build_info Version of the running floodgate.\n"
      "# TYPE floodgate_build_info gauge\n";
  out += fmt::format("floodgate_build_info{{version=\"{}\",store=\"{}\"}} 1\n", kVersion,
                     escape(store.Describe()));
  out +=
      "# HELP floodgate_decisions_total Decisions by rule and result.\n"
      "# TYPE floodgate_decisions_total counter\n";
  {
    std::lock_guard lock(mu_);
    std::map<std::string, const RuleCounters*> sorted;
    for (const auto& [name, counters] : rules_) sorted.emplace(name, counters.get());
    static constexpr const char* kResults[] = {"allowed", "denied", "degraded"};
    // The blocked family, from the same pass, follows this one.
    std::string blocked =
        "# HELP floodgate_blocked_total Denials by rule answered under a penalty block (block=D, "
        "docs/algorithms.md \"Blocks\"), the denial that starts a block included.\n"
        "# TYPE floodgate_blocked_total counter\n";
    for (const auto& [name, counters] : sorted) {
      for (int i = 0; i < 3; ++i) {
        out += fmt::format("floodgate_decisions_total{{rule=\"{}\",result=\"{}\"}} {}\n",
                           escape(name), kResults[i], counters->outcomes[i].load());
      }
      blocked += fmt::format("floodgate_blocked_total{{rule=\"{}\"}} {}\n", escape(name),
                             counters->blocked.load());
    }
    out += blocked;
  }
  out +=
      "# HELP floodgate_limit_decisions_total What each limit of a rule did: allowed, denied, "
      "would_deny (a shadow limit would have denied; it did not), denied_by_other (not spent: "
      "another "
      "limit denied the request).\n"
      "# TYPE floodgate_limit_decisions_total counter\n";
  {
    std::lock_guard lock(mu_);
    std::map<std::string, const LimitCounters*> sorted;
    for (const auto& [name, counters] : limits_) sorted.emplace(name, counters.get());
    static constexpr const char* kResults[] = {"allowed", "denied", "would_deny",
                                               "denied_by_other"};
    for (const auto& [name, counters] : sorted) {
      const std::size_t space = name.find(' ');
      for (int i = 0; i < 4; ++i) {
        out += fmt::format(
            "floodgate_limit_decisions_total{{rule=\"{}\",limit=\"{}\",result=\"{}\"}} {}\n",
            escape(name.substr(0, space)), escape(name.substr(space + 1)), kResults[i],
            counters->results[i].load());
      }
    }
  }
  out +=
      "# HELP floodgate_key_operations_total Key operations carried out (/v1/keys/reset, refund, "
      "penalize) by rule and operation.\n"
      "# TYPE floodgate_key_operations_total counter\n";
  {
    std::lock_guard lock(mu_);
    std::map<std::string, const OperationCounters*> sorted;
    for (const auto& [name, counters] : operations_) sorted.emplace(name, counters.get());
    for (const auto& [name, counters] : sorted) {
      for (const KeyOperation op :
           {KeyOperation::kReset, KeyOperation::kRefund, KeyOperation::kPenalize}) {
        out += fmt::format("floodgate_key_operations_total{{rule=\"{}\",operation=\"{}\"}} {}\n",
                           escape(name), KeyOperationName(op),
                           counters->operations[static_cast<int>(op)].load());
      }
    }
  }
  out += fmt::format(
      "# HELP floodgate_key_operations_unauthorized_total Key operations refused for a missing "
      "or wrong bearer token (401).\n"
      "# TYPE floodgate_key_operations_unauthorized_total counter\n"
      "floodgate_key_operations_unauthorized_total {}\n",
      unauthorized_.load());
  out +=
      "# HELP floodgate_store_latency_seconds Time from asking the store to its answer.\n"
      "# TYPE floodgate_store_latency_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += latency_[i].load();
    out += fmt::format("floodgate_store_latency_seconds_bucket{{le=\"{}\"}} {}\n", kBuckets[i],
                       cumulative);
  }
  cumulative += latency_[kBuckets.size()].load();
  out += fmt::format("floodgate_store_latency_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("floodgate_store_latency_seconds_sum {:.9f}\n", latency_sum_ns_.load() / 1e9);
  out += fmt::format("floodgate_store_latency_seconds_count {}\n", latency_count_.load());
  out +=
      "# HELP floodgate_http_responses_total HTTP responses by status class.\n"
      "# TYPE floodgate_http_responses_total counter\n";
  static constexpr const char* kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
  for (int i = 0; i < 6; ++i) {
    out += fmt::format("floodgate_http_responses_total{{code=\"{}\"}} {}\n", kClasses[i],
                       http_[i].load());
  }
  out += fmt::format(
      "# HELP floodgate_http_accept_errors_total Connections the HTTP server failed to accept "
      "(out of file descriptors): attempts, each after a backoff.\n"
      "# TYPE floodgate_http_accept_errors_total counter\nfloodgate_http_accept_errors_total {}\n",
      accept_errors_.load());
  const StoreStats stats = store.Stats();
  out += fmt::format(
      "# HELP floodgate_memory_keys Keys held in process (memory://, or on_error=local's "
      "fallback).\n"
      "# TYPE floodgate_memory_keys gauge\nfloodgate_memory_keys {}\n"
      "# HELP floodgate_memory_evictions_total Live keys evicted to stay under max_keys.\n"
      "# TYPE floodgate_memory_evictions_total counter\nfloodgate_memory_evictions_total {}\n"
      "# HELP floodgate_memory_expired_total Expired keys reclaimed.\n"
      "# TYPE floodgate_memory_expired_total counter\nfloodgate_memory_expired_total {}\n",
      stats.keys, stats.evictions, stats.expired);
  store.AppendMetrics(out);
  return out;
}

}  // namespace floodgate::server
