#pragma once

// The gRPC server's TLS: its certificate, reloaded when the files change, and client certificates
// checked against a CA and a name (GRPC_SERVER_USE_TLS, GRPC_CLIENT_TLS_CACERT,
// GRPC_CLIENT_TLS_SAN).
//
// docs/envoy.md, "gRPC over TLS". Upstream (server_impl.go, tls.go, provider/cert_provider.go at
// f2fb15770f7f) loads the key pair at start (failing the start), reloads it when the certificate's
// directory changes (keeping the old one when the new does not load), requires a client
// certificate signed by the CA when one is given, and checks the client's name as Go's
// x509.VerifyOptions{DNSName: SAN} does.

#include <absl/status/statusor.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::server::rls {

struct GrpcTls {
  std::string cert_file;  // PEM: the server's certificate chain
  std::string key_file;   // PEM: its private key
  // PEM: the CAs client certificates must chain to; empty: no client certificate is asked.
  std::string client_ca_file;
  // The name a client certificate must carry (a DNS name, wildcards as Go matches them, or an
  // IP address); empty: any certificate the CA signed.
  std::string client_san;
};

// How often the certificate files are read again: a renewed certificate serves new connections
// within this (upstream reloads on the directory's change events).
inline constexpr unsigned kCertificateRefreshSeconds = 1;

// The files are read and checked here first (the certificate parses, the key is its key, the
// CA holds a certificate), so a bad file refuses the start by name before gRPC sees it; then
// credentials that re-read them every kCertificateRefreshSeconds, keeping the last good ones.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const GrpcTls& tls);

// The files' check GrpcServerCredentials starts with: readable, bounded, PEM, the key the
// certificate's, the CA holding a certificate.
absl::Status CheckGrpcTlsFiles(const GrpcTls& tls);

// Go's Certificate.VerifyHostname for a client certificate's names: an IP address `san` matches
// an IP SAN; otherwise a DNS SAN equal to it (any case, a trailing dot ignored) or a wildcard
// "*.example.com" covering its first label. The common name is not looked at (Go since 1.15).
bool SanMatches(std::string_view san, const std::vector<std::string_view>& dns_names,
                const std::vector<std::string_view>& ip_names);

}  // namespace floodgate::server::rls
