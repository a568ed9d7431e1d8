#pragma once

// The Redis store's counters, shared by its parts and read by RedisStore::redis_stats.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace floodgate::redis {

struct Counters {
  std::atomic<std::uint64_t> calls{0}, batched{0}, errors{0}, timeouts{0}, degraded{0},
      denial_cache_hits{0}, noscript{0}, reconnects{0}, moved{0}, asked{0}, retried{0},
      refreshes{0}, multi{0}, cross_slot{0}, releases{0}, release_failures{0},
      primary_switches{0}, early_switches{0}, node_batches{0}, node_batch_retries{0}, backlog_timeouts{0};

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

  // The counted part of RedisStats (the store adds what its nodes and router know).
  RedisStats Stats() const {
    RedisStats s;
    s.calls = calls;
    s.batched_decisions = batched;
    s.errors = errors;
    s.last_error = last_error();
    s.timeouts = timeouts;
    s.backlog_timeouts = backlog_timeouts;
    s.degraded = degraded;
    s.denial_cache_hits = denial_cache_hits;
    s.noscript_reloads = noscript;
    s.reconnects = reconnects;
    s.moved = moved;
    s.asked = asked;
    s.retried = retried;
    s.topology_refreshes = refreshes;
    s.multi_decisions = multi;
    s.cross_slot = cross_slot;
    s.releases = releases;
    s.release_failures = release_failures;
    s.node_batches = node_batches;
    s.node_batch_retries = node_batch_retries;
    s.primary_switches = primary_switches;
    s.early_switches = early_switches;
    return s;
  }

 private:
  mutable std::mutex last_error_mu_;
  std::string last_error_;
};

}  // namespace floodgate::redis
