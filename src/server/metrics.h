#pragma once

// The service's Prometheus metrics, every name prefixed floodgate_.
//
// Labels are rule names and fixed words, never a client key: the series count is bounded by the
// config.

#include <absl/container/flat_hash_map.h>
#include <floodgate/store.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace floodgate::server {

enum class Outcome { kAllowed, kDenied, kDegraded };

// What one limit of a request did (docs/multi.md): let it through, denied it, would have
// denied it (a shadow limit), or was not spent because another limit denied.
enum class LimitResult { kAllowed, kDenied, kWouldDeny, kDeniedByOther };

class Metrics {
 public:
  Metrics();
  // Thread-safe.
  void CountDecision(std::string_view rule, Outcome outcome);
  // A denial of a rule's request by a penalty block (Decision::blocked): counted besides
  // its CountDecision.
  void CountBlocked(std::string_view rule);
  // A limit of a rule (`rule` and the limit's name within it; a rule's single policy is
  // the limit named after the rule).
  void CountLimit(std::string_view rule, std::string_view limit, LimitResult result);
  // A key operation the store carried out (/v1/keys/..., docs/http.md "Operating a key"),
  // by the rule it named ("policy" for an inline policy), and one refused for its token.
  void CountOperation(std::string_view rule, KeyOperation operation);
  void CountUnauthorized() { unauthorized_.fetch_add(1, std::memory_order_relaxed); }
  void ObserveStoreLatency(std::chrono::nanoseconds took);
  void CountHttp(int status);
  // A connection the server could not accept (out of file descriptors, say): each attempt,
  // retried after a backoff (http_server.cc).
  void CountAcceptError() { accept_errors_.fetch_add(1, std::memory_order_relaxed); }
  // The exposition text, with the store's own counters read now.
  std::string Render(Store& store) const;

 private:
  struct RuleCounters {
    std::array<std::atomic<std::uint64_t>, 3> outcomes{};
    std::atomic<std::uint64_t> blocked{0};
  };
  // Buckets of the store latency histogram, in seconds.
  static constexpr std::array<double, 14> kBuckets = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                                                      0.0005,  0.001,    0.0025,  0.005,  0.01,
                                                      0.025,   0.05,     0.1,     0.5};

  struct LimitCounters {
    std::array<std::atomic<std::uint64_t>, 4> results{};
  };
  struct OperationCounters {
    std::array<std::atomic<std::uint64_t>, 3> operations{};  // by KeyOperation
  };
  // Counters by label, created on first use and kept while this Metrics lives. `label`
  // is the rule's name, or "<rule> <limit>" (a space: no name holds one).
  template <class Counters>
  Counters& Find(absl::flat_hash_map<std::string, std::unique_ptr<Counters>>& family,
                 std::string_view rule, std::string_view limit);

  const std::uint64_t id_;  // tells this instance's per-thread cache entries from another's
  mutable std::mutex mu_;   // guards the maps, not the counters
  absl::flat_hash_map<std::string, std::unique_ptr<RuleCounters>> rules_;
  absl::flat_hash_map<std::string, std::unique_ptr<LimitCounters>> limits_;
  absl::flat_hash_map<std::string, std::unique_ptr<OperationCounters>> operations_;
  std::atomic<std::uint64_t> unauthorized_{0};
  std::array<std::atomic<std::uint64_t>, kBuckets.size() + 1> latency_{};
  std::atomic<std::uint64_t> latency_count_{0};
  std::atomic<std::uint64_t> latency_sum_ns_{0};
  std::array<std::atomic<std::uint64_t>, 6> http_{};  // 1xx..5xx, other
  std::atomic<std::uint64_t> accept_errors_{0};
};

}  // namespace floodgate::server
