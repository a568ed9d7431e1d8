// envoyproxy/ratelimit's xDS config client: a SotW ADS stream of RateLimitConfig resources.

#include "server/rls/xds_client.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_split.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <random>

#include "common/strings.h"
#include "envoy/service/discovery/v3/discovery.grpc.pb.h"
#include "server/config_file.h"
#include "server/rls/xds_config.h"

namespace floodgate::server::rls {

namespace {

namespace discovery = ::envoy::service::discovery::v3;
using AdsStream =
    grpc::ClientReaderWriter<discovery::DiscoveryRequest, discovery::DiscoveryResponse>;

// Where Debian keeps the system's roots (ca-certificates); gRPC's own default when the
// variable it reads is unset.
constexpr const char* kSystemRoots = "/etc/ssl/certs/ca-certificates.crt";

// upstream's getClientNode: "k=v" entries split on ',' then on the first '='; others skipped.
envoy::config::core::v3::Node NodeOf(const XdsSettings& settings) {
  envoy::config::core::v3::Node node;
  node.set_id(settings.node_id);
  for (absl::string_view entry : absl::StrSplit(settings.node_metadata, ',')) {
    const std::size_t equals = entry.find('=');
    if (equals == absl::string_view::npos) continue;
    // The Struct only when there is metadata (upstream sends an empty one; a server reads
    // both alike), so that no map is touched without it (see the Makefile's TSAN_GTEST_SKIP).
    (*node.mutable_metadata()->mutable_fields())[std::string(entry.substr(0, equals))]
        .set_string_value(std::string(entry.substr(equals + 1)));
  }
  return node;
}

std::shared_ptr<grpc::ChannelCredentials> CredentialsOf(const XdsSettings& settings,
                                                        const XdsTlsFiles& tls) {
  if (!settings.use_tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls.root_certs;
  options.pem_private_key = tls.client_key;
  options.pem_cert_chain = tls.client_cert;
  return grpc::SslCredentials(options);
}

}  // namespace

absl::StatusOr<XdsTlsFiles> XdsTlsFiles::Read(const XdsSettings& settings) {
  XdsTlsFiles files;
  if (!settings.use_tls) return files;
  const auto read = [](const std::string& path, std::string_view what) -> absl::StatusOr<std::string> {
    auto text = ReadConfigFile(path);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{} {}: {}", what, path, MessageOf(text.status())));
    }
    return text;
  };
  if (!settings.server_ca_file.empty()) {
    // As upstream: the CA joins the system's roots (x509.SystemCertPool), it does not replace
    // them. gRPC takes one PEM bundle, so the two are concatenated.
    const char* system = std::getenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH");
    if (auto roots = ReadConfigFile(system != nullptr ? system : kSystemRoots); roots.ok()) {
      files.root_certs = *std::move(roots) + "\n";
    }
    auto ca = read(settings.server_ca_file, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
    if (!ca.ok()) return ca.status();
    if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError(fmt::format(
          "failed to load the provided TLS CA certificate: {}", settings.server_ca_file));
    }
    files.root_certs += *ca;
  }
  // As upstream's TlsConfigFromFiles: a client certificate only when both files are named.
  if (!settings.client_cert_file.empty() && !settings.client_key_file.empty()) {
    auto cert = read(settings.client_cert_file, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
    if (!cert.ok()) return cert.status();
    auto key = read(settings.client_key_file, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    if (!key.ok()) return key.status();
    files.client_cert = *std::move(cert);
    files.client_key = *std::move(key);
  }
  return files;
}

XdsConfigClient::XdsConfigClient(XdsSettings settings, XdsTlsFiles tls, OnUpdate on_update)
    : settings_(std::move(settings)), tls_(std::move(tls)), on_update_(std::move(on_update)) {
  spdlog::info("Starting xDS client connection for rate limit configurations");
  thread_ = std::thread([this] { Run(); });
}

XdsConfigClient::~XdsConfigClient() { Stop(); }

void XdsConfigClient::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // A context cancelled before its call starts cancels the call as it starts.
    if (call_ != nullptr) call_->TryCancel();
  }
  stop_cv_.notify_all();
  std::lock_guard join(join_mu_);  // two Stop()s must not join one thread
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool XdsConfigClient::Pause(std::chrono::nanoseconds wait) {
  std::unique_lock lock(mu_);
  return !stop_cv_.wait_for(lock, wait, [this] { return stopping_; });
}

void XdsConfigClient::Run() {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int attempt = 0;; ++attempt) {
    if (!Stream()) return;
    const auto wait = settings_.backoff.ForAttempt(attempt, uniform(random));
    spdlog::debug("Sleeping for {} using exponential backoff",
                  std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    if (!Pause(wait)) return;
  }
}

bool XdsConfigClient::Stream() {
  grpc::ChannelArguments args;
  if (settings_.max_receive_bytes != 0) {
    spdlog::info("Setting xDS gRPC max receive message size to {} bytes",
                 settings_.max_receive_bytes);
    args.SetMaxReceiveMessageSize(settings_.max_receive_bytes);
  }
  if (settings_.use_tls && !settings_.server_san.empty()) {
    spdlog::info("ServerName used for xDS Management Service hostname verification is {}",
                 settings_.server_san);
    args.SetSslTargetNameOverride(settings_.server_san);
  }
  spdlog::info("Dialing xDS Management Server: '{}'", settings_.server_url);
  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(settings_.server_url, CredentialsOf(settings_, tls_), args);
  // As upstream's grpc.Dial(..., WithBlock()): the stream starts once the channel is up; gRPC
  // retries the connection with its own backoff meanwhile. Checked in steps so that Stop()
  // ends the wait.
  while (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(200))) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
  }
  spdlog::info("Connection to xDS Management Server is successful");
  auto stub = discovery::AggregatedDiscoveryService::NewStub(channel);
  grpc::ClientContext context;
  for (const auto& [name, value] : settings_.headers) {
    context.AddMetadata(absl::AsciiStrToLower(name), value);
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    call_ = &context;
  }
  counters_.streams.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<AdsStream> stream = stub->StreamAggregatedResources(&context);
  const envoy::config::core::v3::Node node = NodeOf(settings_);
  // go-control-plane's send: every request carries the node, the type, the version last
  // applied and the nonce last received; a NACK adds why.
  const auto send = [&](const std::string* error) {
    discovery::DiscoveryRequest request;
    *request.mutable_node() = node;
    request.set_version_info(acked_version_);
    request.set_type_url(std::string(kRateLimitConfigType));
    request.set_response_nonce(last_nonce_);
    if (error != nullptr) request.mutable_error_detail()->set_message(*error);
    return stream->Write(request);
  };
  bool open = send(nullptr);
  discovery::DiscoveryResponse response;
  while (open && stream->Read(&response)) {
    counters_.responses.fetch_add(1, std::memory_order_relaxed);
    last_nonce_ = response.nonce();
    auto files = ConfigFilesOf(response);
    absl::StatusOr<std::shared_ptr<const RlsConfig>> config =
        files.ok() ? ParseRlsConfig(*files, settings_.domains)
                   : absl::StatusOr<std::shared_ptr<const RlsConfig>>(files.status());
    if (!config.ok()) {
      const std::string why(MessageOf(config.status()));
      spdlog::error("Error loading rate limit configuration from xDS Management Server: {}", why);
      // Upstream NACKs a resource it cannot unmarshal without an update event; a config
      // its loader refuses is an update event (counted as a load error) and a NACK.
      if (files.ok()) on_update_(config.status());
      counters_.nacks.fetch_add(1, std::memory_order_relaxed);
      open = send(&why);
      continue;
    }
    on_update_(*std::move(config));
    acked_version_ = response.version_info();
    counters_.acks.fetch_add(1, std::memory_order_relaxed);
    open = send(nullptr);
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  std::lock_guard lock(mu_);
  call_ = nullptr;
  if (stopping_) return false;
  spdlog::error("Failed to receive configuration from xDS Management Server: {}",
                status.ok() ? std::string("the stream ended") : status.error_message());
  return true;
}

}  // namespace floodgate::server::rls
