// Stand-in for the RLS engine until the rls-engine branch is merged (see serve_engine.h):
// it answers every request as upstream answers a domain it has no config for, so that
// the transport (gRPC, POST /json, health) runs and is tested on its own.
#include "server/rls/serve_engine.h"

namespace floodgate::server::rls {

namespace {

class NoLimitsEngine final : public Engine {
 public:
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                       RlsDone done) override {
    response->set_overall_code(pb::RateLimitResponse::OK);
    for (int i = 0; i < request.descriptors_size(); ++i) {
      response->add_statuses()->set_code(pb::RateLimitResponse::OK);
    }
    done(absl::OkStatus());
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> MakeServeEngine(const server::RlsSection& /*section*/,
                                                        std::shared_ptr<Store> /*store*/) {
  return std::make_unique<NoLimitsEngine>();
}

bool ServeEngineIsReal() { return false; }

}  // namespace floodgate::server::rls
