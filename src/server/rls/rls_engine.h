#pragma once

// The Engine on a floodgate Store: envoyproxy/ratelimit's answers by floodgate's algorithms.
//
// docs/envoy.md is the contract.

#include <floodgate/store.h>
#include <floodgate/time.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include <absl/random/random.h>

#include "server/rls/config.h"
#include "server/rls/engine.h"
#include "server/rls/local_cache.h"
#include "server/rls/metrics.h"

namespace floodgate::server::rls {

// The decision time of a request: nullopt lets the store use its own clock (Redis: the
// server's TIME), which is what `serve` does; tests fix it.
using DecisionClock = std::function<std::optional<TimePoint>()>;

class RlsEngine final : public Engine {
 public:
  // `store`, `per_second` and `metrics` must outlive the engine and every request in flight.
  // `per_second` (REDIS_PERSECOND): where upstream's counters of SECOND limits go; nullptr:
  // `store`, as every other.
  RlsEngine(Store& store, RlsSettings settings, std::shared_ptr<const RlsConfig> config,
            RlsMetrics& metrics, DecisionClock clock = {}, Store* per_second = nullptr);

  // Engine. Each descriptor is decided on its own (as upstream) with DecideAsync, the
  // answer sent when the last decision arrives; an all_or_nothing domain's descriptors
  // go to the store as one DecideAllAsync. No thread waits for the store.
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                       RlsDone done) override;

  // Thread-safe: requests that started keep the config they started with.
  void SetConfig(std::shared_ptr<const RlsConfig> config);
  std::shared_ptr<const RlsConfig> config() const;

 private:
  struct Pending;
  void DecideEach(std::shared_ptr<Pending> pending);
  void DecideAll(std::shared_ptr<Pending> pending);
  // Upstream's counters (docs/envoy.md, "Shared counters"): the local cache, then under
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT the counts read first, then each key counted.
  void CountEach(std::shared_ptr<Pending> pending);
  void AddCounts(std::shared_ptr<Pending> pending);
  Store& StoreFor(Unit unit) const;
  std::int64_t Ttl(std::int64_t unit_s);
  void Finish(Pending& pending);

  Store& store_;
  Store* const per_second_;
  const RlsSettings settings_;
  RlsMetrics& metrics_;
  const DecisionClock clock_;
  mutable std::mutex config_mu_;  // guards the pointer only, held for a copy
  std::shared_ptr<const RlsConfig> config_;
  LocalCache local_cache_;
  std::mutex jitter_mu_;
  absl::InsecureBitGen jitter_;  // the TTLs' jitter, as upstream's math/rand
};

}  // namespace floodgate::server::rls
