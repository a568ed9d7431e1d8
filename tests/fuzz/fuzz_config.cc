// libFuzzer: the YAML config parser.
//
// Any text either gives a config or an error naming the source; it never crashes, throws, or hangs.
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto config = floodgate::server::ParseConfig(yaml, "fuzz.yaml");
  if (!config.ok() &&
      std::string(config.status().message()).find("fuzz.yaml") == std::string::npos) {
    std::abort();  // every config error names the file
  }
  return 0;
}
