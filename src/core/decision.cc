// A Decision as the JSON object of docs/service.md, "Decision JSON".

#include <floodgate/decision.h>
#include <fmt/format.h>

namespace floodgate {

std::string ToJson(const Decision& d) {
  std::string out = fmt::format(
      R"({{"allowed":{},"limit":{},"remaining":{},"retry_after_us":{},"reset_after_us":{})",
      d.allowed, d.limit, d.remaining, d.retry_after.count(), d.reset_after.count());
  if (d.delayable) out += fmt::format(R"(,"delay_us":{})", d.delay.count());
  if (d.blocked) out += R"(,"blocked":true)";
  out += d.degraded ? R"(,"degraded":true})" : "}";
  return out;
}

}  // namespace floodgate
