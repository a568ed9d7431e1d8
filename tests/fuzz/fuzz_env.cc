// libFuzzer: upstream's environment values, parsed as Go's strconv and time packages parse them.
//
// The first byte picks the type, the rest is the value: any text either fails with a message or
// parses; an integer parses back from its decimal text, a duration is within Go's range.
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "server/rls/upstream_settings.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace floodgate::server::rls;
  if (size == 0) return 0;
  const auto type = static_cast<EnvType>(data[0] % 8);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto value = ParseEnvValue(type, text);
  if (!value.ok()) {
    if (value.status().message().empty()) std::abort();  // errors must say why
    return 0;
  }
  if (type == EnvType::kInt) {
    const std::int64_t n = std::get<std::int64_t>(*value);
    auto again = ParseGoInt(fmt::format("{}", n));
    if (!again.ok() || *again != n) std::abort();
  }
  // Every variable of the table read from one environment holding the text: no crash.
  Environment environment;
  for (const UpstreamVariable& row : UpstreamVariables()) {
    if (!row.name.ends_with('*')) environment.emplace(std::string(row.name), std::string(text));
  }
  (void)UpstreamEnv::Read(environment, UpstreamVariables());
  return 0;
}
