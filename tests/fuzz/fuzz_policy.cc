// libFuzzer: the policy parser.
//
// Any text either fails with a message or gives a policy whose canonical string parses back to the
// same policy; a zone it takes is on tzdata's list, never a path (the corpus holds paths, FIFOs'
// stand-ins and zone names: a tz that opened /dev/stdin would block this harness).
#include <floodgate/policy.h>

#include <cstdlib>
#include <string_view>

#include "core/zone_names.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = floodgate::Policy::Parse(text);
  if (!policy.ok()) {
    if (policy.status().message().empty()) std::abort();  // errors must say why
    return 0;
  }
  if (!policy->tz.empty() && !floodgate::core::SystemZoneNames().Contains(policy->tz)) std::abort();
  auto again = floodgate::Policy::Parse(policy->ToString());
  if (!again.ok() || !(*again == *policy)) std::abort();
  if (!floodgate::ParseDuration(text).ok()) return 0;
  return 0;
}
