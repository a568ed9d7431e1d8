#pragma once

// The decision endpoints of the HTTP API (docs/service.md, "HTTP API").
//
// Each is a function of the request, the config in force and the decider; each calls `respond`
// exactly once, inline or later on the store's thread.

#include <atomic>
#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <memory>

#include "server/config.h"
#include "server/decider.h"
#include "server/http_message.h"

namespace floodgate::server::endpoints {

// POST /v1/check: one key under a rule or an inline policy, or "items" (docs/multi.md).
void Check(const Request& request, const ServerConfig& config, Decider& decider, Respond respond);

// What /v1/reserve and /v1/settle hold, or /v1/acquire and /v1/release: a lease is a
// reservation of 1 for the lease time, released by settling it at 0 (docs/leases.md).
enum class Holding { kReservation, kLease };

// POST /v1/reserve or /v1/acquire (docs/reservations.md, docs/leases.md).
void Reserve(const Request& request, const ServerConfig& config, Holding holding, Decider& decider,
             Respond respond);
// POST /v1/settle or /v1/release; without a body, the settle hook.
void Settle(const Request& request, Holding holding, Decider& decider, Respond respond);

// POST /v1/keys/reset, /v1/keys/refund, /v1/keys/penalize (docs/http.md, "Operating a key"):
// 404 without `admin:` in the config, 401 without its bearer token.
void OperateKey(const Request& request, const ServerConfig& config, KeyOperation operation,
                Decider& decider, Respond respond);

// The /v1/authz answers held for their delay (docs/http.md, "Waiting"), counted per process.
// Thread-safe.
class WaitingPlaces {
 public:
  // A place while fewer than `max` are taken, else null. The place is given back when the
  // last copy of the token is gone (it may outlive this object).
  std::shared_ptr<const void> Take(std::int64_t max);
  std::int64_t taken() const { return count_->load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> count_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
};

// /v1/authz: the rules the original request matches, decided for its client (nginx
// auth_request, Envoy ext_authz, Traefik forwardAuth). An admission with a delay is held
// that long (a place in `waiting`) and then answered 204.
void Authz(const Request& request, const boost::asio::ip::address& peer, const ServerConfig& config,
           Decider& decider, WaitingPlaces& waiting, Respond respond);

}  // namespace floodgate::server::endpoints
