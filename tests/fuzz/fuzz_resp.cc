// libFuzzer: the replies our Redis client accepts, through the RESP reader and the decoder.
//
// Arbitrary bytes go through the RESP reader, and every reply it yields through the decision
// decoder, for 1 to 3 decisions, with and without the batch script's trailing clock, and
// through the counters' decoder (lua/upstream.lua) for 1 to 3 counters.
#include <cstdlib>
#include <vector>

#include "store/redis/decode.h"
#include "store/redis/resp.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  floodgate::redis::ReplyReader reader;
  if (!reader.Feed(reinterpret_cast<const char*>(data), size).ok()) return 0;
  const std::vector<std::int64_t> limits = {10, 1'000'000'000, 1};
  for (int replies = 0; replies < 64; ++replies) {
    auto reply = reader.Next();
    if (!reply.ok() || *reply == nullptr) break;
    for (std::size_t n = 1; n <= limits.size(); ++n) {
      for (const bool with_clock : {false, true}) {
        auto decoded = floodgate::redis::DecodeDecisions(**reply, {limits.data(), n}, with_clock);
        if (!decoded.ok()) continue;
        if (decoded->decisions.size() != n || decoded->clock_us < 0) std::abort();
        for (std::size_t i = 0; i < n; ++i) {
          const auto& d = decoded->decisions[i];
          if (d.ok() && (d->limit != limits[i] || d->remaining < 0 || d->degraded)) std::abort();
        }
      }
      auto counts = floodgate::redis::DecodeCounts(**reply, n);
      if (!counts.ok()) continue;
      if (counts->size() != n) std::abort();
      for (const auto& count : *counts) {
        if (count.ok() && *count < 0) std::abort();
      }
    }
  }
  return 0;
}
