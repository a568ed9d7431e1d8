#include "server/rls/grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include <mutex>
#include <utility>

#include "common/strings.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace floodgate::server::rls {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both number google.rpc.Code; absl's codes
  // beyond it (none today) would read as UNKNOWN.
  const int code = static_cast<int>(status.code());
  const auto grpc_code = code >= 0 && code <= static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)
                             ? static_cast<grpc::StatusCode>(code)
                             : grpc::StatusCode::UNKNOWN;
  return {grpc_code, std::string(status.message())};
}

// The callback API: a call holds no thread while the engine waits for the store; the
// engine's `done` (inline, or on the store's I/O thread) finishes the call.
class GrpcServer::Service final
    : public ::envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  explicit Service(Engine& engine) : engine_(engine) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const pb::RateLimitRequest* request,
                                            pb::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    // gRPC keeps `request` and `response` alive until the reactor finishes.
    engine_.ShouldRateLimit(*request, response, [reactor](absl::Status status) {
      reactor->Finish(ToGrpcStatus(status));
    });
    return reactor;
  }

 private:
  Engine& engine_;
};

GrpcServer::GrpcServer(Engine& engine, GrpcOptions options)
    : engine_(engine), options_(std::move(options)), service_(std::make_unique<Service>(engine)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

absl::Status GrpcServer::Start() {
  // Process-wide in gRPC: every server built from here on gets the standard health
  // service (grpc.health.v1.Health), which Envoy's and Kubernetes' gRPC probes call.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  // No SO_REUSEPORT: a second floodgate on the same port must fail to start, not share
  // the calls unannounced.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(HostPort(options_.host, options_.port),
                           grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    server_.reset();
    return absl::UnavailableError(
        fmt::format("cannot listen for gRPC on {} (address in use or not local?)",
                    HostPort(options_.host, options_.port)));
  }
  port_ = static_cast<std::uint16_t>(bound_port);
  SetServing(true);
  return absl::OkStatus();
}

void GrpcServer::SetServing(bool serving) {
  if (server_ == nullptr) return;
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus("", serving);
    health->SetServingStatus(kHealthName, serving);
  }
}

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (server_ == nullptr) return;
  // Shutdown is idempotent in gRPC; the health service answers NOT_SERVING from here on.
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
}

}  // namespace floodgate::server::rls
