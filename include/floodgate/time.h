#pragma once

// Decision time: whole microseconds on the Unix epoch, and the latest time allowed.

#include <chrono>

namespace floodgate {

// Decision times are whole microseconds on the Unix epoch (docs/algorithms.md, "Units and
// inputs"): every store, Redis included, agrees on that clock.
using TimePoint = std::chrono::sys_time<std::chrono::microseconds>;

// Decision times must be before this (2200-01-01): every time plus the longest period
// then stays below 2^53 µs, where doubles, and Redis's Lua numbers, are still exact.
inline constexpr TimePoint kLatestTime{std::chrono::microseconds(7'258'118'400'000'000)};

// The wall clock read at microsecond resolution.
inline TimePoint SystemNow() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

}  // namespace floodgate
