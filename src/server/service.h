#pragma once

// The HTTP API of `floodgate serve`, independent of sockets: routing and the config in force.
//
// docs/service.md, "HTTP API". A parsed request and the peer address in, a response out through a
// callback (store decisions may complete on the store's I/O thread). Routes each path to its
// endpoint and keeps the config in force.

#include <floodgate/store.h>

#include <atomic>
#include <boost/asio/ip/address.hpp>
#include <functional>
#include <memory>
#include <string>

#include "server/config.h"
#include "server/decider.h"
#include "server/endpoints/endpoints.h"
#include "server/http_message.h"
#include "server/metrics.h"

namespace floodgate::server {

namespace rls {
class Engine;
}

// Whether upstream's /healthcheck answers 200 (else 500 with an empty body); thread-safe.
using HealthCheck = std::function<bool()>;

class Service final : public HttpHandler {
 public:
  // `store` and the initial config; the demo page's placeholders are filled once.
  Service(std::shared_ptr<Store> store, std::shared_ptr<const ServerConfig> config);

  // Thread-safe. Calls `respond` exactly once, inline or later.
  void Handle(const Request& request, const boost::asio::ip::address& peer,
              Respond respond) override;

  // Envoy's rate limit service for `POST /json`, as upstream's HTTP port offers it.
  // Called before serving; `engine` outlives the service.
  void AttachRls(rls::Engine* engine) { rls_ = engine; }
  // Upstream's /healthcheck health (the `ratelimit` command's: draining, a domain loaded,
  // Redis connected); without one it answers 200 `OK`. Called before serving.
  void SetHealthCheck(HealthCheck health) { health_ = std::move(health); }

  // Swaps in a new config (SIGHUP); requests in flight keep the one they started with.
  void Reload(std::shared_ptr<const ServerConfig> config);
  std::shared_ptr<const ServerConfig> config() const { return config_.load(); }

  // Counts a response by status class for /metrics; the server calls it as it writes.
  void CountResponse(int status) override { metrics_.CountHttp(status); }
  // Counts a failed accept for /metrics (the server backs off and retries).
  void CountAcceptError() override { metrics_.CountAcceptError(); }

 private:
  // The current config, through a per-thread cache: loading the shared pointer itself on
  // every request costs a lock and two reference-count updates.
  const ServerConfig& CurrentConfig();

  std::shared_ptr<Store> store_;
  rls::Engine* rls_ = nullptr;
  HealthCheck health_;
  std::atomic<std::shared_ptr<const ServerConfig>> config_;
  std::atomic<std::uint64_t> config_generation_{0};
  const std::uint64_t id_;  // tells this service's cache entries from another's
  std::string demo_page_;
  Metrics metrics_;
  Decider decider_{store_, metrics_};
  endpoints::WaitingPlaces waiting_;  // /v1/authz answers held for their delay
};

}  // namespace floodgate::server
