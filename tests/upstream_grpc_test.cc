// `ratelimit` (upstream's mode) serving gRPC as upstream's server_impl.go does, a process on a real
// redis-server: TLS and mTLS (GRPC_SERVER_USE_TLS, GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN)
// with certificates the test makes, the certificate reloaded, GRPC_UDS, GRPC_MAX_CONNECTION_AGE;
// and the config switches QUOTA_MODE, RESPONSE_DYNAMIC_METADATA and MERGE_DOMAIN_CONFIG.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "hang_guard.h"
#include "redis_server.h"
#include "rls_request.h"
#include "serve_process.h"
#include "test_certificates.h"
#include "upstream_process.h"

namespace floodgate::testing {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr const char* kOnePerMinute = R"(domain: rl
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 100}
)";

// The compose file's environment, and `more`.
std::vector<std::string> Environment(const RedisServer& redis, const ConfigRoot& config,
                                     const Ports& ports, std::vector<std::string> more) {
  std::vector<std::string> env = ComposeEnvironment(redis, config, ports);
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One ShouldRateLimit on `channel`: its status, and the answer.
std::pair<grpc::Status, pb::RateLimitResponse> Ask(const std::shared_ptr<grpc::Channel>& channel,
                                                   const pb::RateLimitRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kHangGuard);
  pb::RateLimitResponse response;
  const grpc::Status status =
      pb::RateLimitService::NewStub(channel)->ShouldRateLimit(&context, request, &response);
  return {status, response};
}

pb::RateLimitRequest OneRequest() { return RlsRequest("rl", {RlsDescriptor{{{"k", "v"}}}}); }

// A TLS channel to 127.0.0.1:`port` trusting `ca`, with a client certificate when `client` is
// given (<client>.crt, <client>.key).
std::shared_ptr<grpc::Channel> TlsChannel(const Certificates& certs, int port,
                                          const std::string& ca, const std::string& client = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(certs[ca + ".crt"]);
  if (!client.empty()) {
    ssl.pem_cert_chain = ReadFile(certs[client + ".crt"]);
    ssl.pem_private_key = ReadFile(certs[client + ".key"]);
  }
  // A channel of its own each: a failed handshake is not retried on a shared subchannel.
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(fmt::format("127.0.0.1:{}", port), grpc::SslCredentials(ssl),
                                   args);
}

std::shared_ptr<grpc::Channel> PlainChannel(const std::string& target) {
  return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
}

class UpstreamGrpcProcess : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = std::make_unique<Certificates>();
    certs_->Ca("ca");
    certs_->Ca("other-ca");
    certs_->Leaf("server", "ca", "subjectAltName=IP:127.0.0.1");
    certs_->Leaf("renewed", "other-ca", "subjectAltName=IP:127.0.0.1");
    certs_->Leaf("envoy", "ca", "subjectAltName=DNS:envoy.client");
    certs_->Leaf("other-name", "ca", "subjectAltName=DNS:other.client");
    certs_->Leaf("stranger", "other-ca", "subjectAltName=DNS:envoy.client");
  }
  static void TearDownTestSuite() { certs_.reset(); }
  void SetUp() override {
    ASSERT_TRUE(certs_->ok());
    redis_ = RedisServer::Start();
    ASSERT_NE(redis_, nullptr);
    config_.Write("config.yaml", kOnePerMinute);
  }
  std::vector<std::string> Env(std::vector<std::string> more) const {
    return Environment(*redis_, config_, ports_, std::move(more));
  }

  static inline std::unique_ptr<Certificates> certs_;
  std::unique_ptr<RedisServer> redis_;
  ConfigRoot config_;
  Ports ports_;
};

// GRPC_SERVER_USE_TLS alone: TLS, no client certificate asked.
TEST_F(UpstreamGrpcProcess, ServesTls) {
  const Certificates& certs = *certs_;
  ServeProcess process(
      {},
      Env({"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
           "GRPC_SERVER_TLS_KEY=" + certs["server.key"]}),
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  const auto [tls, answer] = Ask(TlsChannel(certs, ports_.grpc, "ca"), OneRequest());
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  EXPECT_EQ(answer.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_FALSE(Ask(PlainChannel(fmt::format("127.0.0.1:{}", ports_.grpc)), OneRequest()).first.ok())
      << "plaintext on a TLS port";
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "other-ca"), OneRequest()).first.ok())
      << "a client that does not trust the server's CA";
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();
}

// mTLS: a client certificate from GRPC_CLIENT_TLS_CACERT, naming GRPC_CLIENT_TLS_SAN.
TEST_F(UpstreamGrpcProcess, ChecksClientCertificates) {
  const Certificates& certs = *certs_;
  ServeProcess process(
      {},
      Env({"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
           "GRPC_SERVER_TLS_KEY=" + certs["server.key"],
           "GRPC_CLIENT_TLS_CACERT=" + certs["ca.crt"], "GRPC_CLIENT_TLS_SAN=envoy.client"}),
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  const auto [ok, answer] = Ask(TlsChannel(certs, ports_.grpc, "ca", "envoy"), OneRequest());
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(answer.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "ca"), OneRequest()).first.ok())
      << "no client certificate";
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "ca", "stranger"), OneRequest()).first.ok())
      << "a client certificate from another CA";
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "ca", "other-name"), OneRequest()).first.ok())
      << "a client certificate for another name";
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();

  // Without GRPC_CLIENT_TLS_SAN, any certificate the CA signed.
  ServeProcess any_name(
      {},
      Env({"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
           "GRPC_SERVER_TLS_KEY=" + certs["server.key"],
           "GRPC_CLIENT_TLS_CACERT=" + certs["ca.crt"]}),
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(any_name.WaitListening(ports_.http, kHangGuard)) << any_name.Log();
  EXPECT_TRUE(Ask(TlsChannel(certs, ports_.grpc, "ca", "other-name"), OneRequest()).first.ok());
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "ca", "stranger"), OneRequest()).first.ok());
  EXPECT_EQ(any_name.Stop(kHangGuard), 0) << any_name.Log();
}

// As upstream's CertProvider: a new certificate in the files serves new connections, without a
// restart.
TEST_F(UpstreamGrpcProcess, ReloadsTheCertificate) {
  const Certificates& certs = *certs_;
  const std::filesystem::path dir = std::filesystem::path(config_.root()) / "certs";
  std::filesystem::create_directories(dir);
  const auto install = [&](const std::string& name) {
    // Each file replaced whole (a rename), the key first.
    for (const char* ext : {".key", ".crt"}) {
      const auto target = dir / (std::string("tls") + ext);
      std::filesystem::copy_file(certs[name + ext], target.string() + ".new",
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(target.string() + ".new", target);
    }
  };
  install("server");
  ServeProcess process(
      {},
      Env({"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + (dir / "tls.crt").string(),
           "GRPC_SERVER_TLS_KEY=" + (dir / "tls.key").string()}),
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  EXPECT_TRUE(Ask(TlsChannel(certs, ports_.grpc, "ca"), OneRequest()).first.ok());
  EXPECT_FALSE(Ask(TlsChannel(certs, ports_.grpc, "other-ca"), OneRequest()).first.ok());
  install("renewed");
  // Read again within kCertificateRefreshSeconds: polled, bounded.
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  bool renewed = false;
  while (!renewed && std::chrono::steady_clock::now() < deadline) {
    renewed = Ask(TlsChannel(certs, ports_.grpc, "other-ca"), OneRequest()).first.ok();
    if (!renewed) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(renewed) << "the renewed certificate never served";
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();
}

// A TLS setting that cannot serve stops the start (exit 2) by name, before Redis is waited for.
TEST_F(UpstreamGrpcProcess, RefusesBadTlsSettings) {
  const Certificates& certs = *certs_;
  const std::string bad_ca = config_.root() + "/not-a-ca.pem";
  std::ofstream(bad_ca) << "not a certificate\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"GRPC_SERVER_USE_TLS=true"}, "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
      {{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
        "GRPC_SERVER_TLS_KEY=/tmp/elsewhere/server.key"},
       "must be in the same directory"},
      {{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
        "GRPC_SERVER_TLS_KEY=" + certs["envoy.key"]},
       "is not the key of the certificate"},
      {{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs["server.crt"],
        "GRPC_SERVER_TLS_KEY=" + certs["server.key"], "GRPC_CLIENT_TLS_CACERT=" + bad_ca},
       "holds no PEM certificate"},
      {{"GRPC_MAX_CONNECTION_AGE=-1s"}, "GRPC_MAX_CONNECTION_AGE=\"-1s\": must not be negative"},
  };
  for (const auto& [more, message] : cases) {
    ServeProcess process({}, Env(more), {.start_as = StartAs::kRatelimit});
    EXPECT_EQ(process.WaitExit(kHangGuard), 2) << message;
    EXPECT_THAT(process.Log(), HasSubstr(message));
  }
}

// GRPC_UDS: gRPC on a unix socket instead of GRPC_HOST:GRPC_PORT.
TEST_F(UpstreamGrpcProcess, ListensOnAUnixSocket) {
  const std::string socket = config_.root() + "/ratelimit.sock";
  ServeProcess process({}, Env({"GRPC_UDS=" + socket}), {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  const auto [status, answer] = Ask(PlainChannel("unix:" + socket), OneRequest());
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answer.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_FALSE(process.WaitListening(ports_.grpc, milliseconds(0))) << "GRPC_PORT is open too";
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();
}

// GRPC_MAX_CONNECTION_AGE: a connection that old is sent GOAWAY (the channel leaves READY); the
// next call connects anew. The grace is long: with 1 s, a call slower than age + grace (TSan
// beside two busy neighbours) was cut off, and the test asserts the GOAWAY, not a speed.
TEST_F(UpstreamGrpcProcess, ConnectionsAgeOut) {
  ServeProcess process({}, Env({"GRPC_MAX_CONNECTION_AGE=1s", "GRPC_MAX_CONNECTION_AGE_GRACE=60s"}),
                       {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  auto channel = PlainChannel(fmt::format("127.0.0.1:{}", ports_.grpc));
  ASSERT_TRUE(Ask(channel, OneRequest()).first.ok());
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                          std::chrono::system_clock::now() + kHangGuard))
      << "the connection was never closed";
  EXPECT_TRUE(Ask(channel, OneRequest()).first.ok());
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();
}

// MERGE_DOMAIN_CONFIG, QUOTA_MODE and RESPONSE_DYNAMIC_METADATA over the wire.
TEST_F(UpstreamGrpcProcess, ConfigSwitches) {
  config_.Write("config.yaml", R"(domain: rl
descriptors:
  - key: k
    metadata: {team: payments}
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  config_.Write("more.yaml", R"(domain: rl
descriptors:
  - key: other
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  {
    // Without MERGE_DOMAIN_CONFIG the two files are a duplicate domain: the start fails.
    ServeProcess refused({}, Env({}), {.start_as = StartAs::kRatelimit});
    EXPECT_NE(refused.WaitExit(kHangGuard), 0);
    EXPECT_THAT(refused.Log(), HasSubstr("duplicate domain 'rl' in config file"));
  }
  ServeProcess process(
      {}, Env({"MERGE_DOMAIN_CONFIG=true", "QUOTA_MODE=true", "RESPONSE_DYNAMIC_METADATA=true"}),
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports_.http, kHangGuard)) << process.Log();
  auto channel = PlainChannel(fmt::format("127.0.0.1:{}", ports_.grpc));
  const auto both =
      RlsRequest("rl", {RlsDescriptor{{{"k", "v"}}}, RlsDescriptor{{{"other", "o"}}}});
  const auto [first, admitted] = Ask(channel, both);
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(admitted.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_EQ(admitted.statuses(1).current_limit().requests_per_unit(), 1u) << "more.yaml's limit";
  ASSERT_TRUE(admitted.dynamic_metadata().fields().contains("metadata"));
  EXPECT_EQ(admitted.dynamic_metadata()
                .fields()
                .at("metadata")
                .struct_value()
                .fields()
                .at("team")
                .string_value(),
            "payments");
  // Quota mode: one over and one passing is OK...
  const auto [second, one_over] = Ask(
      channel, RlsRequest("rl", {RlsDescriptor{{{"k", "v"}}}, RlsDescriptor{{{"other", "o2"}}}}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(one_over.statuses(0).code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(one_over.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_FALSE(one_over.dynamic_metadata().fields().contains("metadata")) << "k did not pass";
  // ...every one over is OVER_LIMIT.
  EXPECT_EQ(Ask(channel, both).second.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(process.Stop(kHangGuard), 0) << process.Log();
}

}  // namespace
}  // namespace floodgate::testing
