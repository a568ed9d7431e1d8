#pragma once

#include <chrono>

namespace floodgate {

// Decision times are whole microseconds on the Unix epoch (algorithms.md, "Units and
// inputs"): every store, Redis included, agrees on that clock.
using TimePoint = std::chrono::sys_time<std::chrono::microseconds>;

// The wall clock read at microsecond resolution.
inline TimePoint SystemNow() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

}  // namespace floodgate
