// libFuzzer: the replay trace line parser (one JSON object per line).
#include <cstdlib>
#include <string_view>

#include "cli/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  floodgate::cli::TraceParser parser;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The same parser over several lines, as replay uses it.
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    auto event = parser.Parse(text.substr(begin, end - begin));
    if (event.ok() && (event->key.empty() || event->cost < 0)) std::abort();
    begin = end + 1;
  }
  return 0;
}
