// The gRPC server's TLS credentials: files checked first, reloaded by gRPC, client names checked.

#include "server/rls/grpc_tls.h"

#include <absl/strings/ascii.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>

#include "common/status_macros.h"
#include "common/strings.h"

namespace floodgate::server::rls {

namespace {

namespace experimental = grpc::experimental;

// Certificates and keys are small; a "certificate" past this is not one (a device, a log).
constexpr std::size_t kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(fmt::format("cannot read the {} {}", what, path));
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        fmt::format("the {} {} is larger than {} bytes", what, path, kMaxPemBytes));
  }
  return text;
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The certificates of a PEM text, at least one.
absl::StatusOr<std::vector<std::unique_ptr<X509, X509Free>>> Certificates(const std::string& pem,
                                                                          const std::string& path,
                                                                          std::string_view what) {
  std::vector<std::unique_ptr<X509, X509Free>> certs;
  Bio bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the text reads as an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("the {} {} holds no PEM certificate", what, path));
  }
  return certs;
}

}  // namespace

// Checked as upstream's tls.LoadX509KeyPair and AppendCertsFromPEM check them, before gRPC is
// handed the paths (gRPC 1.51 logs and serves nothing on a bad file; a bad CA also leaked its
// options under LeakSanitizer).
absl::Status CheckGrpcTlsFiles(const GrpcTls& tls) {
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "GRPC_SERVER_USE_TLS needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  }
  std::string cert_pem;
  std::string key_pem;
  FG_ASSIGN(cert_pem, ReadPem(tls.cert_file, "certificate"));
  FG_ASSIGN(key_pem, ReadPem(tls.key_file, "key"));
  auto chain = Certificates(cert_pem, tls.cert_file, "certificate");
  if (!chain.ok()) return chain.status();
  Bio key_bio = MemoryBio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("the key {} holds no PEM private key", tls.key_file));
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(fmt::format("the key {} is not the key of the certificate {}",
                                                  tls.key_file, tls.cert_file));
  }
  if (!tls.client_ca_file.empty()) {
    std::string ca_pem;
    FG_ASSIGN(ca_pem, ReadPem(tls.client_ca_file, "client CA"));
    FG_RETURN_IF_ERROR(Certificates(ca_pem, tls.client_ca_file, "client CA").status());
  }
  return absl::OkStatus();
}

namespace {

// GRPC_CLIENT_TLS_SAN, after gRPC has checked the chain against the CA (and, as OpenSSL does
// for a server, the certificate's purpose: client authentication, as upstream's KeyUsages).
class SanVerifier final : public experimental::ExternalCertificateVerifier {
 public:
  explicit SanVerifier(std::string san) : san_(std::move(san)) {}

  bool Verify(experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/, grpc::Status* sync_status) override {
    std::vector<std::string_view> dns;
    std::vector<std::string_view> ips;
    for (const auto& name : request->dns_names()) dns.emplace_back(name.data(), name.size());
    for (const auto& name : request->ip_names()) ips.emplace_back(name.data(), name.size());
    *sync_status = SanMatches(san_, dns, ips)
                       ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                      fmt::format("the client certificate is not for {}", san_));
    return true;  // answered at once
  }
  void Cancel(experimental::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::string san_;
};

std::string TrimDot(std::string_view name) {
  if (name.ends_with('.')) name.remove_suffix(1);
  return absl::AsciiStrToLower(ToAbsl(name));
}

// The 16 bytes of an IPv4 or IPv6 address (v4 as ::ffff:a.b.c.d, as Go's net.IP compares).
std::optional<std::array<unsigned char, 16>> IpBytes(std::string_view text) {
  std::string host(text);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  std::array<unsigned char, 16> bytes{};
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    bytes[10] = 0xff;
    bytes[11] = 0xff;
    std::memcpy(bytes.data() + 12, &v4, 4);
    return bytes;
  }
  if (inet_pton(AF_INET6, host.c_str(), bytes.data()) == 1) return bytes;
  return std::nullopt;
}

}  // namespace

bool SanMatches(std::string_view san, const std::vector<std::string_view>& dns_names,
                const std::vector<std::string_view>& ip_names) {
  if (const auto ip = IpBytes(san)) {
    for (std::string_view name : ip_names) {
      if (IpBytes(name) == ip) return true;
    }
    return false;
  }
  const std::string host = TrimDot(san);
  if (host.empty()) return false;
  for (std::string_view name : dns_names) {
    const std::string pattern = TrimDot(name);
    if (pattern == host) return true;
    // Go's matchHostnames: "*" is a whole first label, and covers exactly one label.
    if (pattern.size() > 2 && pattern.starts_with("*.")) {
      const std::size_t dot = host.find('.');
      if (dot != std::string::npos && dot > 0 &&
          std::string_view(host).substr(dot) == std::string_view(pattern).substr(1)) {
        return true;
      }
    }
  }
  return false;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const GrpcTls& tls) {
  FG_RETURN_IF_ERROR(CheckGrpcTlsFiles(tls));
  const bool clients = !tls.client_ca_file.empty();
  auto provider =
      clients ? std::make_shared<experimental::FileWatcherCertificateProvider>(
                    tls.key_file, tls.cert_file, tls.client_ca_file, kCertificateRefreshSeconds)
              : std::make_shared<experimental::FileWatcherCertificateProvider>(
                    tls.key_file, tls.cert_file, kCertificateRefreshSeconds);
  experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (clients) {
    // Upstream: tls.RequireAndVerifyClientCert once a client CA is given.
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    if (!tls.client_san.empty()) {
      options.set_certificate_verifier(
          experimental::ExternalCertificateVerifier::Create<SanVerifier>(tls.client_san));
    }
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return experimental::TlsServerCredentials(options);
}

}  // namespace floodgate::server::rls
