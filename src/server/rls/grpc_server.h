#pragma once

// Envoy's rate limit service over gRPC (RLS v3) and gRPC health, for `serve --grpc-listen`.
//
// `/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and the standard gRPC health
// service. Transport only: every request goes to an Engine.

#include <absl/status/status.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/server.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/rls/engine.h"
#include "server/rls/grpc_tls.h"

namespace floodgate::server::rls {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8081;  // 0: any free port (see GrpcServer::port())
  int threads = 0;  // threads serving calls, each with a completion queue; 0: one per core
  // GRPC_UDS: listen on this unix socket instead of host:port.
  std::string unix_socket;
  // GRPC_SERVER_USE_TLS and its files; nullopt: plaintext.
  std::optional<GrpcTls> tls;
  // GRPC_MAX_CONNECTION_AGE / _GRACE: a connection is sent GOAWAY once this old (gRPC adds
  // ±10% jitter, as Go's), and closed `grace` later; nullopt or 0: never.
  std::optional<std::chrono::milliseconds> max_connection_age;
  std::optional<std::chrono::milliseconds> max_connection_age_grace;
};

// The gRPC code Envoy sees for an engine error: the absl code as is (both follow
// google.rpc.Code).
grpc::Status ToGrpcStatus(const absl::Status& status);

class GrpcServer {
 public:
  // `engine` must outlive the server.
  GrpcServer(Engine& engine, GrpcOptions options);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving (the health service answers SERVING for "" and
  // "ratelimit"); an address in use, or a TLS file that does not load, is an error.
  absl::Status Start();
  // Health for "" and "ratelimit": follows the service's readiness (the store reachable),
  // as /readyz does. Thread-safe.
  void SetServing(bool serving);
  // Stops accepting calls, lets calls in flight finish until `grace` has passed, then
  // cancels the rest and closes every connection, idle ones included, without waiting
  // for their clients. Blocks until the server is down and the engine has answered every
  // call it was given (it must answer, in time: serve closes the store beside this).
  // Thread-safe; idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // The TCP port bound (0 on a unix socket).
  std::uint16_t port() const { return port_; }
  // "host:port" or "unix:/path", as listened on.
  std::string address() const;

  // The health service names: "" (the whole server) and upstream's "ratelimit".
  static constexpr const char* kHealthName = "ratelimit";
  // Calls each serving thread decides at once; more wait in gRPC until a slot frees.
  static constexpr int kCallsPerThread = 256;

 private:
  class Service;

  GrpcOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::uint16_t port_ = 0;
  std::mutex shutdown_mutex_;
  bool stopped_ = false;
};

}  // namespace floodgate::server::rls
