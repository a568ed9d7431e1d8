#pragma once

// envoyproxy/ratelimit's xDS config client: its RateLimitConfig resources over a SotW ADS stream.
//
// docs/envoy.md, "Config from xDS" (CONFIG_TYPE=GRPC_XDS_SOTW). As upstream's
// src/provider/xds_grpc_sotw_provider.go with go-control-plane's SotW ADS client
// (pkg/client/sotw/v3): one stream of AggregatedDiscoveryService, a wildcard subscription to
// kRateLimitConfigType; every response loaded as the whole config and then ACKed (the version
// it carried) or NACKed (the last version applied, the reason in error_detail), a bad one
// keeping the last good config; a broken stream retried after the backoff.

#include <absl/functional/any_invocable.h>
#include <absl/status/statusor.h>
#include <grpcpp/client_context.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/rls/config.h"
#include "server/rls/upstream_mode.h"

namespace floodgate::server::rls {

// The TLS material the settings name, read once at start (so a missing or unreadable file
// stops the start, as upstream's settings panic). Empty strings when unused.
struct XdsTlsFiles {
  std::string root_certs;  // the system's roots, then the CA file
  std::string client_cert;
  std::string client_key;
  static absl::StatusOr<XdsTlsFiles> Read(const XdsSettings& settings);
};

struct XdsCounters {
  std::atomic<std::uint64_t> responses{0};
  std::atomic<std::uint64_t> acks{0};
  std::atomic<std::uint64_t> nacks{0};
  std::atomic<std::uint64_t> streams{0};  // streams opened (the first, then each reconnect)
};

class XdsConfigClient {
 public:
  // Each response: the config it made, or why it was refused (an error that is not the
  // config's, such as a resource of another type, is NACKed without a call: upstream sends
  // no update event for those). Called on the client's thread, one at a time.
  using OnUpdate = absl::AnyInvocable<void(absl::StatusOr<std::shared_ptr<const RlsConfig>>)>;

  // Starts dialing at once, on a thread of its own.
  XdsConfigClient(XdsSettings settings, XdsTlsFiles tls, OnUpdate on_update);
  ~XdsConfigClient();  // Stop()
  XdsConfigClient(const XdsConfigClient&) = delete;
  XdsConfigClient& operator=(const XdsConfigClient&) = delete;

  // Ends the stream and the dialing, and joins the thread. Thread-safe; idempotent.
  void Stop();
  const XdsCounters& counters() const { return counters_; }

 private:
  void Run();
  // One dial and stream, until it breaks or Stop(); false once stopping.
  bool Stream();
  // Waits `wait` or until Stop(); false when stopped.
  bool Pause(std::chrono::nanoseconds wait);

  const XdsSettings settings_;
  const XdsTlsFiles tls_;
  OnUpdate on_update_;
  XdsCounters counters_;
  // What go-control-plane's client keeps across streams: the version last applied and the
  // nonce of the response last received, sent in each request.
  std::string acked_version_;
  std::string last_nonce_;

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  grpc::ClientContext* call_ = nullptr;  // the stream's, while one is open: cancelled by Stop
  std::mutex join_mu_;
  std::thread thread_;
};

}  // namespace floodgate::server::rls
