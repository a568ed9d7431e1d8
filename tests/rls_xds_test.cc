// envoyproxy/ratelimit's config over xDS: resources as config files, and the SotW client against
// a real ADS server over loopback (the server a test double of a management server).
//
// What is checked is upstream's client (xds_grpc_sotw_provider.go with go-control-plane's SotW
// ADS client): the requests it sends (node, type, version, nonce, NACK's reason), what it loads,
// and that it comes back after the stream breaks.
#include <gmock/gmock.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "envoy/service/discovery/v3/discovery.grpc.pb.h"
#include "hang_guard.h"
#include "server/config_file.h"
#include "server/rls/xds_client.h"
#include "server/rls/xds_config.h"
#include "test_certificates.h"

namespace floodgate::server::rls {
namespace {

namespace discovery = ::envoy::service::discovery::v3;
namespace conf = ::ratelimit::config::ratelimit::v3;
namespace ext = ::envoy::extensions::common::ratelimit::v3;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

ext::RateLimitDescriptor Descriptor(
    std::initializer_list<std::pair<std::string, std::string>> entries) {
  ext::RateLimitDescriptor descriptor;
  for (const auto& [key, value] : entries) {
    auto* entry = descriptor.add_entries();
    entry->set_key(key);
    entry->set_value(value);
  }
  return descriptor;
}

conf::RateLimitDescriptor* AddDescriptor(
    google::protobuf::RepeatedPtrField<conf::RateLimitDescriptor>* list, const std::string& key,
    const std::string& value, conf::RateLimitUnit unit, std::uint32_t requests) {
  conf::RateLimitDescriptor* descriptor = list->Add();
  descriptor->set_key(key);
  descriptor->set_value(value);
  if (requests > 0) {
    descriptor->mutable_rate_limit()->set_unit(unit);
    descriptor->mutable_rate_limit()->set_requests_per_unit(requests);
  }
  return descriptor;
}

// A response holding one RateLimitConfig per (name, domain, key, requests per minute).
struct Resource {
  std::string name;
  std::string domain;
  std::string key;
  std::uint32_t per_minute;
  conf::RateLimitUnit unit = conf::MINUTE;
};
discovery::DiscoveryResponse Response(const std::string& version, const std::string& nonce,
                                      const std::vector<Resource>& resources) {
  discovery::DiscoveryResponse response;
  response.set_version_info(version);
  response.set_nonce(nonce);
  response.set_type_url(std::string(kRateLimitConfigType));
  for (const Resource& r : resources) {
    conf::RateLimitConfig config;
    config.set_name(r.name);
    config.set_domain(r.domain);
    AddDescriptor(config.mutable_descriptors(), r.key, "", r.unit, r.per_minute);
    response.add_resources()->PackFrom(config);
  }
  return response;
}

// ---- resources as config files ----

TEST(XdsConfigTest, AResourceLoadsAsTheFileItStandsFor) {
  conf::RateLimitConfig config;
  config.set_name("mine");
  config.set_domain("edge");
  conf::RateLimitDescriptor* user =
      AddDescriptor(config.mutable_descriptors(), "user", "", conf::UNKNOWN, 0);
  // Values YAML would read as something else unquoted, and upstream's wildcard suffix.
  AddDescriptor(user->mutable_descriptors(), "path", "null", conf::SECOND, 3);
  AddDescriptor(user->mutable_descriptors(), "path", "/api/*", conf::HOUR, 7)->set_shadow_mode(true);
  conf::RateLimitDescriptor* named =
      AddDescriptor(config.mutable_descriptors(), "tier", "true: \"x\"", conf::DAY, 5);
  named->mutable_rate_limit()->set_name("tier-limit");
  named->set_detailed_metric(true);
  AddDescriptor(config.mutable_descriptors(), "free", "", conf::UNKNOWN, 0)
      ->mutable_rate_limit()
      ->set_unlimited(true);

  discovery::DiscoveryResponse response;
  response.add_resources()->PackFrom(config);
  auto files = ConfigFilesOf(response);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].name, "xds:mine");
  auto parsed = ParseRlsConfig(*files);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << (*files)[0].text;

  const RlsLimit* exact = (*parsed)->Find("edge", Descriptor({{"user", "u1"}, {"path", "null"}}));
  ASSERT_NE(exact, nullptr) << (*files)[0].text;
  EXPECT_EQ(exact->requests_per_unit, 3u);
  EXPECT_EQ(exact->unit, pb::RateLimitResponse::RateLimit::SECOND);
  const RlsLimit* wildcard =
      (*parsed)->Find("edge", Descriptor({{"user", "u1"}, {"path", "/api/v1"}}));
  ASSERT_NE(wildcard, nullptr);
  EXPECT_EQ(wildcard->requests_per_unit, 7u);
  EXPECT_TRUE(wildcard->shadow);
  const RlsLimit* tier = (*parsed)->Find("edge", Descriptor({{"tier", "true: \"x\""}}));
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->name, "tier-limit");
  EXPECT_TRUE(tier->detailed_metric);
  const RlsLimit* free = (*parsed)->Find("edge", Descriptor({{"free", "anything"}}));
  ASSERT_NE(free, nullptr);
  EXPECT_TRUE(free->unlimited);
}

TEST(XdsConfigTest, ARefusedResourceIsRefusedAsItsFileWouldBe) {
  // UNKNOWN with a limit: upstream's loader panics on "invalid rate limit unit".
  auto files = ConfigFilesOf(Response("1", "n", {{"bad", "d", "k", 3, conf::UNKNOWN}}));
  ASSERT_TRUE(files.ok());
  auto parsed = ParseRlsConfig(*files);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("xds:bad"));
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("invalid rate limit unit"));
  // Two resources of one domain: as two files of one domain.
  auto twice = ConfigFilesOf(Response("1", "n", {{"a", "d", "k", 3}, {"b", "d", "k", 4}}));
  ASSERT_TRUE(twice.ok());
  EXPECT_FALSE(ParseRlsConfig(*twice).ok());
}

TEST(XdsConfigTest, ResourcesOfAnotherTypeOrTooManyAreRefusedBeforeLoading) {
  discovery::DiscoveryResponse other;
  discovery::DiscoveryRequest not_a_config;
  other.add_resources()->PackFrom(not_a_config);
  auto files = ConfigFilesOf(other);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(std::string(files.status().message()), HasSubstr("only " + std::string(kRateLimitConfigType)));

  discovery::DiscoveryResponse garbage;
  google::protobuf::Any* any = garbage.add_resources();
  any->set_type_url(std::string(kRateLimitConfigType));
  any->set_value("\xff\xff\xff");
  EXPECT_FALSE(ConfigFilesOf(garbage).ok());

  std::vector<Resource> many;
  for (std::size_t i = 0; i <= kMaxXdsResources; ++i) {
    many.push_back({"r" + std::to_string(i), "d" + std::to_string(i), "k", 1});
  }
  auto too_many = ConfigFilesOf(Response("1", "n", many));
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("at most 1000"));
}

// ---- the client against an ADS server ----

// A management server: records every request, sends what the test queues, ends a stream when
// told. One stream at a time.
class AdsServer final : public discovery::AggregatedDiscoveryService::Service {
 public:
  explicit AdsServer(std::shared_ptr<grpc::ServerCredentials> credentials =
                         grpc::InsecureServerCredentials()) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~AdsServer() override { Close(); }

  void Close() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    changed_.notify_all();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
  }
  int port() const { return port_; }

  grpc::Status StreamAggregatedResources(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<discovery::DiscoveryResponse, discovery::DiscoveryRequest>* stream)
      override {
    {
      std::lock_guard lock(mu_);
      ++streams_;
      for (const auto& [key, value] : context->client_metadata()) {
        metadata_.emplace_back(std::string(key.data(), key.size()),
                               std::string(value.data(), value.size()));
      }
    }
    changed_.notify_all();
    std::thread reader([&] {
      discovery::DiscoveryRequest request;
      while (stream->Read(&request)) {
        std::lock_guard lock(mu_);
        requests_.push_back(request);
        changed_.notify_all();
      }
      std::lock_guard lock(mu_);
      reader_done_ = true;
      changed_.notify_all();
    });
    std::unique_lock lock(mu_);
    for (;;) {
      changed_.wait(lock, [&] { return closing_ || end_stream_ || !outgoing_.empty() || reader_done_; });
      if (closing_ || end_stream_ || reader_done_) break;
      discovery::DiscoveryResponse response = outgoing_.front();
      outgoing_.pop_front();
      lock.unlock();
      stream->Write(response);
      lock.lock();
    }
    end_stream_ = false;
    lock.unlock();
    context->TryCancel();  // ends the reader's Read
    reader.join();
    std::lock_guard relock(mu_);
    reader_done_ = false;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the test ends this stream");
  }

  void Send(discovery::DiscoveryResponse response) {
    std::lock_guard lock(mu_);
    outgoing_.push_back(std::move(response));
    changed_.notify_all();
  }
  void EndStream() {
    std::lock_guard lock(mu_);
    end_stream_ = true;
    changed_.notify_all();
  }
  // The request number `n` (from 0) on any stream, waiting for it (bounded).
  std::optional<discovery::DiscoveryRequest> Request(std::size_t n) {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, testing::kHangGuard, [&] { return requests_.size() > n; })) {
      return std::nullopt;
    }
    return requests_[n];
  }
  int WaitStreams(int n) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, testing::kHangGuard, [&] { return streams_ >= n; });
    return streams_;
  }
  std::vector<std::pair<std::string, std::string>> metadata() {
    std::lock_guard lock(mu_);
    return metadata_;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<discovery::DiscoveryResponse> outgoing_;
  std::vector<discovery::DiscoveryRequest> requests_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  int streams_ = 0;
  bool end_stream_ = false;
  bool reader_done_ = false;
  bool closing_ = false;
};

// What the client handed over, in order.
class Updates {
 public:
  XdsConfigClient::OnUpdate Sink() {
    return [this](absl::StatusOr<std::shared_ptr<const RlsConfig>> update) {
      std::lock_guard lock(mu_);
      updates_.push_back(std::move(update));
      changed_.notify_all();
    };
  }
  std::optional<absl::StatusOr<std::shared_ptr<const RlsConfig>>> Get(std::size_t n) {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, testing::kHangGuard, [&] { return updates_.size() > n; })) {
      return std::nullopt;
    }
    return updates_[n];
  }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return updates_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<absl::StatusOr<std::shared_ptr<const RlsConfig>>> updates_;
};

XdsSettings SettingsFor(const AdsServer& server) {
  XdsSettings settings;
  settings.server_url = "127.0.0.1:" + std::to_string(server.port());
  settings.node_id = "node-7";
  settings.node_metadata = "zone=a,skipped,role=rls=x";
  settings.headers = {{"X-Token", "secret"}};
  // A short wait after a broken stream: the test waits for the reconnect as an event.
  settings.backoff = GoBackoff{10ms, 20ms, 2.0, false};
  return settings;
}

TEST(XdsClientTest, AcksAGoodConfigNacksABadOneKeepingTheLastAndComesBackAfterABreak) {
  AdsServer server;
  Updates updates;
  XdsConfigClient client(SettingsFor(server), {}, updates.Sink());

  // The first request: the node, the type, no version, no nonce (go-control-plane's InitConnect).
  auto first = server.Request(0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->type_url(), kRateLimitConfigType);
  EXPECT_EQ(first->node().id(), "node-7");
  const auto& fields = first->node().metadata().fields();
  ASSERT_EQ(fields.size(), 2u) << "entries without '=' are skipped, the first '=' splits";
  EXPECT_EQ(fields.at("zone").string_value(), "a");
  EXPECT_EQ(fields.at("role").string_value(), "rls=x");
  EXPECT_EQ(first->version_info(), "");
  EXPECT_EQ(first->response_nonce(), "");
  EXPECT_TRUE(first->resource_names().empty());
  EXPECT_THAT(server.metadata(), ::testing::Contains(std::pair<std::string, std::string>(
                                     "x-token", "secret")));

  // A good config: loaded, then ACKed with its version and nonce.
  server.Send(Response("v1", "n1", {{"a", "edge", "user", 5}}));
  auto loaded = updates.Get(0);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_TRUE(loaded->ok()) << loaded->status();
  const RlsLimit* limit = (**loaded)->Find("edge", Descriptor({{"user", "x"}}));
  ASSERT_NE(limit, nullptr);
  EXPECT_EQ(limit->requests_per_unit, 5u);
  auto ack = server.Request(1);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->version_info(), "v1");
  EXPECT_EQ(ack->response_nonce(), "n1");
  EXPECT_FALSE(ack->has_error_detail());

  // A config the loader refuses: an update that is an error, and a NACK with the last version.
  server.Send(Response("v2", "n2", {{"a", "edge", "user", 5, conf::UNKNOWN}}));
  auto refused = updates.Get(1);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->ok());
  auto nack = server.Request(2);
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->version_info(), "v1");
  EXPECT_EQ(nack->response_nonce(), "n2");
  EXPECT_THAT(nack->error_detail().message(), HasSubstr("invalid rate limit unit"));

  // A resource of another type: NACKed with no update (upstream sends no event for it).
  discovery::DiscoveryResponse other = Response("v3", "n3", {});
  other.add_resources()->PackFrom(discovery::DiscoveryRequest());
  server.Send(other);
  auto nack_type = server.Request(3);
  ASSERT_TRUE(nack_type.has_value());
  EXPECT_EQ(nack_type->version_info(), "v1");
  EXPECT_EQ(nack_type->response_nonce(), "n3");
  EXPECT_FALSE(nack_type->error_detail().message().empty());

  // The stream breaks: a new one after the backoff, starting from what was applied.
  server.EndStream();
  ASSERT_EQ(server.WaitStreams(2), 2);
  auto again = server.Request(4);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->version_info(), "v1");
  EXPECT_EQ(again->response_nonce(), "n3");
  server.Send(Response("v4", "n4", {{"a", "edge", "user", 9}}));
  auto reloaded = updates.Get(2);
  ASSERT_TRUE(reloaded.has_value());
  ASSERT_TRUE(reloaded->ok());
  EXPECT_EQ((**reloaded)->Find("edge", Descriptor({{"user", "x"}}))->requests_per_unit, 9u);
  auto ack_again = server.Request(5);  // sent after the update and the counters
  ASSERT_TRUE(ack_again.has_value());
  EXPECT_EQ(ack_again->version_info(), "v4");
  EXPECT_EQ(updates.size(), 3u) << "the resource of another type made no update";
  EXPECT_EQ(client.counters().acks.load(), 2u);
  EXPECT_EQ(client.counters().nacks.load(), 2u);
  client.Stop();
}

TEST(XdsClientTest, DialsOverTlsTrustingTheCaAndCheckingTheName) {
  floodgate::testing::Certificates certs;
  ASSERT_TRUE(certs.Ca("ca") && certs.Leaf("xds", "ca", "subjectAltName=DNS:xds.test"));
  auto key = ReadConfigFile(certs["xds.key"]);
  auto cert = ReadConfigFile(certs["xds.crt"]);
  ASSERT_TRUE(key.ok() && cert.ok());
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  AdsServer server(grpc::SslServerCredentials(options));
  XdsSettings settings = SettingsFor(server);
  settings.use_tls = true;
  settings.server_ca_file = certs["ca.crt"];
  settings.server_san = "xds.test";  // the certificate names no IP: the SAN is what is checked
  auto tls = XdsTlsFiles::Read(settings);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_THAT(tls->root_certs, HasSubstr(*ReadConfigFile(certs["ca.crt"])));
  Updates updates;
  XdsConfigClient client(settings, *std::move(tls), updates.Sink());
  ASSERT_TRUE(server.Request(0).has_value());
  server.Send(Response("v1", "n1", {{"a", "edge", "user", 5}}));
  auto loaded = updates.Get(0);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(loaded->ok());
  client.Stop();
}

TEST(XdsClientTest, StopEndsTheDialWhileNoServerAnswers) {
  // Nothing listens on the port yet: the client keeps dialing; Stop ends it.
  XdsSettings settings;
  settings.server_url = "127.0.0.1:1";  // refused: no server on port 1 of loopback
  Updates updates;
  XdsConfigClient client(settings, {}, updates.Sink());
  client.Stop();
  EXPECT_EQ(client.counters().streams.load(), 0u);
  EXPECT_EQ(updates.size(), 0u);
}

TEST(XdsTlsFilesTest, AMissingOrBadFileStopsTheStart) {
  XdsSettings settings;
  settings.use_tls = true;
  settings.server_ca_file = "/nonexistent/ca.pem";
  auto missing = XdsTlsFiles::Read(settings);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"));
  settings.server_ca_file = "/etc/hostname";  // a regular file that holds no certificate
  auto bad = XdsTlsFiles::Read(settings);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("failed to load the provided TLS CA"));
  // Without TLS nothing is read.
  settings.use_tls = false;
  EXPECT_TRUE(XdsTlsFiles::Read(settings).ok());
}

TEST(GoBackoffTest, AsJpilloraComputesIt) {
  // Upstream's xDS defaults: factor 0.5, so every wait is the initial interval.
  const GoBackoff xds{10s, 60s, 0.5, true};
  for (int attempt : {0, 1, 5, 100}) {
    for (double random : {0.0, 0.5, 0.999}) EXPECT_EQ(xds.ForAttempt(attempt, random), 10s);
  }
  const GoBackoff doubling{1s, 30s, 2.0, false};
  EXPECT_EQ(doubling.ForAttempt(0, 0.3), 1s);
  EXPECT_EQ(doubling.ForAttempt(3, 0.3), 8s);
  EXPECT_EQ(doubling.ForAttempt(10, 0.3), 30s);
  const GoBackoff jittered{1s, 30s, 2.0, true};
  EXPECT_EQ(jittered.ForAttempt(2, 0.5), 2500ms);  // between 1 s and 4 s
  EXPECT_EQ(GoBackoff({5s, 1s, 2.0, true}).ForAttempt(0, 0.1), 1s) << "min >= max waits max";
  EXPECT_EQ(GoBackoff({1s, 30s, 1e300, true}).ForAttempt(62, 0.0), 30s) << "no overflow";
}

}  // namespace
}  // namespace floodgate::server::rls
