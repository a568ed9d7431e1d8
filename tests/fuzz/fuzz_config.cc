// libFuzzer: the YAML config parsers, floodgate's and envoyproxy/ratelimit's.
//
// Any text either gives a config or an error naming the source; it never crashes, throws, or hangs,
// and costs no more than the bounds of docs/security.md ("Configuration files"): the seeds hold an
// alias bomb, an alias loop, keys given twice and documents of many rules.
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/config.h"
#include "server/rls/config.h"

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
  return 0;
}
