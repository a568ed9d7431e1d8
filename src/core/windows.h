#pragma once

// sliding_window and fixed_window: the same steps as their lua/ scripts.
//
// docs/algorithms.md, "sliding_window (two-counter approximation, O(1) memory)" and "fixed_window".
// Included by core/algorithms.h, which declares them (sliding_log is in core/sliding_log.cc).

#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"

namespace floodgate::core {

struct WindowClock {
  std::int64_t now;
  std::int64_t window;  // w = floor(now / P)
};

// w for `now`, with time going backwards clamped to the start of the stored window.
template <class WindowState>
WindowClock ClampedWindow(std::int64_t now, std::int64_t period, const WindowState* stored) {
  std::int64_t window = FloorToInt(D(now) / D(period));
  if (stored != nullptr && stored->window > window) {
    window = stored->window;
    now = window * period;
  }
  return {now, window};
}

// A sliding window's counts as window w sees them: the stored window rolled forward.
struct WindowCounts {
  std::int64_t cur = 0;
  std::int64_t prev = 0;
};
inline WindowCounts CountsAt(const SlidingWindowState* stored, std::int64_t w) {
  if (stored != nullptr && stored->window == w) return {stored->cur, stored->prev};
  if (stored != nullptr && stored->window == w - 1) return {0, stored->cur};
  return {};
}

inline Outcome<SlidingWindowState> DecideSlidingWindow(const Policy& policy,
                                                       const SlidingWindowState* stored,
                                                       std::int64_t now, std::int64_t cost,
                                                       Decision& decision) {
  const std::int64_t period = policy.period.count();
  const std::int64_t limit = policy.limit;
  const auto [at, w] = ClampedWindow(now, period, stored);
  const std::int64_t x = at - w * period;
  const WindowCounts counts = CountsAt(stored, w);
  std::int64_t cur = counts.cur;
  const std::int64_t prev = counts.prev;

  double estimate = D(prev) * D(period - x) / D(period) + D(cur);
  const bool allowed = cost == 0 || estimate + D(cost) <= D(limit);
  Outcome<SlidingWindowState> out;
  std::int64_t retry = 0;
  if (allowed) {
    if (cost > 0) {
      cur += cost;
      estimate += D(cost);
      out.write =
          SlidingWindowState{w, static_cast<std::uint32_t>(cur), static_cast<std::uint32_t>(prev)};
    }
  } else if (cost > limit) {
    retry = -1;
  } else {
    // The earliest t with no other traffic at which estimate(t) + cost <= limit.
    std::int64_t t;
    if (cur <= limit - cost && prev > 0) {
      t = w * period + CeilToInt(D(period) - D(limit - cost - cur) * D(period) / D(prev));
    } else {
      t = (w + 1) * period +
          std::max<std::int64_t>(0, CeilToInt(D(period) - D(limit - cost) * D(period) / D(cur)));
    }
    retry = t - at;
  }
  const std::int64_t reset =
      cur > 0 ? (w + 2) * period - at : (prev > 0 ? (w + 1) * period - at : 0);
  SetDecision(decision, allowed, limit, FloorToInt(D(limit) - estimate), retry, reset);
  out.ttl_us = reset;
  return out;
}

inline Outcome<FixedWindowState> DecideFixedWindow(const Policy& policy,
                                                   const FixedWindowState* stored, std::int64_t now,
                                                   std::int64_t cost, Decision& decision) {
  const std::int64_t period = policy.period.count();
  const std::int64_t limit = policy.limit;
  const auto [at, w] = ClampedWindow(now, period, stored);
  std::int64_t count = stored != nullptr && stored->window == w ? stored->count : 0;

  const bool allowed = cost == 0 || count + cost <= limit;
  Outcome<FixedWindowState> out;
  if (allowed && cost > 0) {
    count += cost;
    out.write = FixedWindowState{w, count};
  }
  const std::int64_t end = (w + 1) * period - at;
  const std::int64_t retry = allowed ? 0 : (cost > limit ? -1 : end);
  const std::int64_t reset = count > 0 ? end : 0;
  SetDecision(decision, allowed, limit, limit - count, retry, reset);
  out.ttl_us = reset;
  return out;
}

}  // namespace floodgate::core
