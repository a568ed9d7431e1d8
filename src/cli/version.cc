// The text of `floodgate --version`: what a bug report or an operator needs to know.
#include "cli/version.h"

#include <floodgate/version.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

namespace floodgate::cli {

std::string VersionText(std::string_view revision) {
  // The Redis features are those src/store/redis/redis_options.cc parses a URL for: RESP2
  // through hiredis' reply reader (no HELLO 3), TLS through Asio's OpenSSL stream.
  return fmt::format(
      "floodgate {} (git {})\n"
      "stores: memory://, Redis\n"
      "redis: RESP2; TCP (redis://), TLS (rediss://, ?tls=1, client certificates), "
      "unix sockets (redis+unix://), Cluster (redis-cluster://), "
      "Sentinel (redis-sentinel://, rediss-sentinel://), ACL user/password, "
      "WAIT for replicas (wait_replicas=N)\n"
      "envoy: rate limit service RLS v3 over gRPC, grpc.health.v1\n"
      "libraries: {}, hiredis {}.{}.{}, gRPC {}",
      kVersion, revision, OpenSSL_version(OPENSSL_VERSION), HIREDIS_MAJOR, HIREDIS_MINOR,
      HIREDIS_PATCH, grpc::Version());
}

}  // namespace floodgate::cli
