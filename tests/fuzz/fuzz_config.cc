// libFuzzer: the YAML config parsers, floodgate's and envoyproxy/ratelimit's, and upstream's
// config as an xDS server sends it (a DiscoveryResponse of RateLimitConfig resources).
//
// Any text either gives a config or an error naming the source; it never crashes, throws, or hangs,
// and costs no more than the bounds of docs/security.md ("Configuration files"): the seeds hold an
// alias bomb, an alias loop, keys given twice, documents of many rules, upstream's newer keys
// (rls_upstream_keys.yaml) and xDS responses (xds_*.bin, made by `protoc --encode` from text).
#include <algorithm>
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
  namespace rls = floodgate::server::rls;
  const auto config = rls::ParseRlsConfig({{"fuzz.yaml", std::string(yaml)}});
  NamesTheSource(config.status());
  // MERGE_DOMAIN_CONFIG: the same file twice merges into its own domain (every descriptor a
  // duplicate composite key, unless there are none).
  NamesTheSource(
      rls::ParseRlsConfig({{"fuzz.yaml", std::string(yaml)}, {"fuzz.yaml", std::string(yaml)}},
                          rls::DomainFiles::kMerged)
          .status());
  if (config.ok() && size > 0) {
    // Matching, wildcards anywhere included: the text's own lines as a descriptor's values.
    ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor descriptor;
    std::string_view rest = yaml;
    for (int i = 0; i < 4 && !rest.empty(); ++i) {
      const std::size_t end = std::min(rest.find('\n'), rest.size());
      auto* entry = descriptor.add_entries();
      entry->set_key("key");
      entry->set_value(std::string(rest.substr(0, end)));
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    (void)(*config)->Match("domain", descriptor);
  }
  // The same bytes as an xDS response: its resources' YAML through the same parser.
  envoy::service::discovery::v3::DiscoveryResponse response;
  if (response.ParseFromArray(data, static_cast<int>(size))) {
    auto files = floodgate::server::rls::ConfigFilesOf(response);
    if (files.ok()) (void)floodgate::server::rls::ParseRlsConfig(*files);
  }
  return 0;
}
