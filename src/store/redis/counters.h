#pragma once

// The Redis store's counters, shared by its parts and read by RedisStore::redis_stats.

#include <absl/status/status.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace floodgate::redis {

struct Counters {
  std::atomic<std::uint64_t> calls{0}, batched{0}, errors{0}, timeouts{0}, degraded{0},
      denial_cache_hits{0}, noscript{0}, reconnects{0}, moved{0}, asked{0}, retried{0},
      refreshes{0}, multi{0}, cross_slot{0}, releases{0}, release_failures{0},
      primary_switches{0}, node_batches{0}, node_batch_retries{0};

  // The message of the last failed decision: a counter says how many, this says why
  // (a test's failure message, an operator's first look).
  void RecordError(const absl::Status& status) {
    ++errors;
    std::lock_guard lock(last_error_mu_);
    last_error_ = std::string(status.message());
  }
  std::string last_error() const {
    std::lock_guard lock(last_error_mu_);
    return last_error_;
  }

 private:
  mutable std::mutex last_error_mu_;
  std::string last_error_;
};

}  // namespace floodgate::redis
