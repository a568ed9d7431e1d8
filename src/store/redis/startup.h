#pragma once

// Start-up: what Open waits for (a connection, or a cluster's topology) and the last error.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include "common/strings.h"
#include "store/redis/node.h"

namespace floodgate::redis {

// Written on the I/O thread, waited on by Open. Thread-safe.
class Startup {
 public:
  void LaneReady() {
    std::lock_guard lock(mu_);
    ++ready_lanes_;
    cv_.notify_all();
  }
  // I/O thread: a connection of `lane` failed (a lane counts once among the failed).
  void LaneDown(const Lane& lane, const absl::Status& status) {
    std::lock_guard lock(mu_);
    if (first_error_.ok()) first_error_ = status;
    last_error_ = std::string(MessageOf(status));
    if (lane.failures() == 1) ++failed_lanes_;
    cv_.notify_all();
  }
  // Every seed refused to give the topology (Redis Sentinel: no sentinel named the
  // primary): Open fails with `error`.
  void TopologyRefused(absl::Status error) {
    std::lock_guard lock(mu_);
    topology_error_ = std::move(error);
    last_error_ = std::string(MessageOf(topology_error_));
    cv_.notify_all();
  }
  void TopologyKnown() {
    std::lock_guard lock(mu_);
    topology_known_ = true;
  }
  // The topology is known and every primary's connections have been tried.
  void ClusterSettled() {
    std::lock_guard lock(mu_);
    cluster_settled_ = true;
    cv_.notify_all();
  }

  std::string LastError(const RedisStoreOptions& options) {
    std::lock_guard lock(mu_);
    return last_error_.empty() ? fmt::format("redis at {} is not connected", options.Describe())
                               : last_error_;
  }

  // One server (standalone, or Sentinel's primary): succeeds once one of its `lanes`
  // connections is ready, fails with the first error when none gets there (or with why no
  // sentinel named a primary). With lazy_connect it waits the same way (so that a Redis
  // that is up serves the very first decision), at most connect_timeout, and succeeds
  // whatever came of it: the connections keep trying in the background.
  absl::Status WaitForConnection(const RedisStoreOptions& options, std::size_t lanes) {
    std::unique_lock lock(mu_);
    const bool settled = cv_.wait_for(lock, Patience(options), [&] {
      return ready_lanes_ > 0 || failed_lanes_ >= lanes || !topology_error_.ok();
    });
    if (options.lazy_connect || ready_lanes_ > 0) return absl::OkStatus();
    if (!topology_error_.ok()) return topology_error_;
    return Failed(options, settled);
  }

  // Redis Cluster: succeeds once a seed told the topology and every primary's connections
  // were tried (`seeds`: the seeds' connections, one each); lazy_connect as above.
  absl::Status WaitForSlotMap(const RedisStoreOptions& options, std::size_t seeds) {
    std::unique_lock lock(mu_);
    const bool settled = cv_.wait_for(lock, Patience(options), [&] {
      return cluster_settled_ || !topology_error_.ok() || failed_lanes_ >= seeds;
    });
    if (options.lazy_connect || topology_known_) return absl::OkStatus();
    if (!topology_error_.ok()) return topology_error_;
    return Failed(options, settled);
  }

 private:
  static std::chrono::microseconds Patience(const RedisStoreOptions& options) {
    return options.lazy_connect ? options.connect_timeout
                                : options.connect_timeout + std::chrono::seconds(1);
  }
  absl::Status Failed(const RedisStoreOptions& options, bool settled) const {
    if (!settled || first_error_.ok()) {
      return absl::DeadlineExceededError(
          fmt::format("redis unreachable at {}: no answer", options.Describe()));
    }
    return first_error_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t ready_lanes_ = 0;
  std::size_t failed_lanes_ = 0;
  bool topology_known_ = false;
  bool cluster_settled_ = false;
  absl::Status topology_error_;
  absl::Status first_error_;
  std::string last_error_;
};

}  // namespace floodgate::redis
