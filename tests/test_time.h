#pragma once

// The instant (µs since the Unix epoch) the table-driven tests start their clocks at.

#include <cstdint>

namespace floodgate {
inline constexpr std::int64_t T0 = 1'700'000'000'000'000;
}  // namespace floodgate
