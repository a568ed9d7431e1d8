// libFuzzer: the YAML config parsers, floodgate's and envoyproxy/ratelimit's, and upstream's
// config as an xDS server sends it (a DiscoveryResponse of RateLimitConfig resources).
//
// Any text either gives a config or an error naming the source; it never crashes, throws, or hangs,
// and costs no more than the bounds of docs/security.md ("Configuration files"): the seeds hold an
// alias bomb, an alias loop, keys given twice, documents of many rules, and xDS responses
// (xds_*.bin, made by `protoc --encode` from text).
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/config.h"
#include "server/rls/config.h"
#include "server/rls/xds_config.h"

namespace {

void NamesTheSource(const absl::Status& status) {
  if (!status.ok() && std::string(status.message()).find("fuzz.yaml") == std::string::npos) {
    std::abort();  // every config error names the file
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  NamesTheSource(floodgate::server::ParseConfig(yaml, "fuzz.yaml").status());
  NamesTheSource(
      floodgate::server::rls::ParseRlsConfig({{"fuzz.yaml", std::string(yaml)}}).status());
  // The same bytes as an xDS response: its resources' YAML through the same parser.
  envoy::service::discovery::v3::DiscoveryResponse response;
  if (response.ParseFromArray(data, static_cast<int>(size))) {
    auto files = floodgate::server::rls::ConfigFilesOf(response);
    if (files.ok()) (void)floodgate::server::rls::ParseRlsConfig(*files);
  }
  return 0;
}
