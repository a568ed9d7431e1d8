#pragma once

// sliding_window and fixed_window: the same steps as their lua/ scripts.
//
// docs/algorithms.md, "sliding_window (two-counter approximation, O(1) memory)" and "fixed_window".
// Included by core/algorithms.h, which declares them (sliding_log is in core/sliding_log.cc).

#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"
#include "core/calendar.h"

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

// The window holding `now` and its bounds: epoch-aligned multiples of P, or with tz the
// calendar window (docs/algorithms.md, "Calendar windows"), where start(w) = w*P,
// end(w) = (w+1)*P and end(w+1) = (w+2)*P become the zone's local midnights. Time going
// backwards is clamped as in ClampedWindow.
struct WindowSpan {
  std::int64_t now;       // clamped
  std::int64_t window;    // w (an ordinal with tz, core/calendar.h)
  std::int64_t start;     // start(w)
  std::int64_t end;       // end(w) = start(w + 1)
  std::int64_t next_end;  // end(w + 1)
};
template <class WindowState>
WindowSpan WindowSpanAt(const Policy& policy, std::int64_t now, const WindowState* stored) {
  if (policy.calendar == Calendar::kNone) {
    const std::int64_t period = policy.period.count();
    const auto [at, w] = ClampedWindow(now, period, stored);
    return {at, w, w * period, (w + 1) * period, (w + 2) * period};
  }
  const CalendarZone calendar = CalendarOf(policy);
  std::int64_t w = CalendarWindowOf(calendar, now);
  std::int64_t start = CalendarStart(calendar, w);
  if (stored != nullptr && stored->window > w) {
    w = stored->window;
    now = start = CalendarStart(calendar, w);
  }
  const std::int64_t end = CalendarStart(calendar, w + 1);
  return {now, w, start, end, CalendarStart(calendar, w + 2)};
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
  const std::int64_t limit = policy.limit;
  const WindowSpan span = WindowSpanAt(policy, now, stored);
  const std::int64_t at = span.now;
  const std::int64_t w = span.window;
  const std::int64_t period = span.end - span.start;  // P_w
  const std::int64_t x = at - span.start;
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
      t = span.start + CeilToInt(D(period) - D(limit - cost - cur) * D(period) / D(prev));
    } else {
      const std::int64_t next = span.next_end - span.end;  // P_n
      t = span.end +
          std::max<std::int64_t>(0, CeilToInt(D(next) - D(limit - cost) * D(next) / D(cur)));
    }
    retry = t - at;
  }
  const std::int64_t reset = cur > 0 ? span.next_end - at : (prev > 0 ? span.end - at : 0);
  SetDecision(decision, allowed, limit, FloorToInt(D(limit) - estimate), retry, reset);
  out.ttl_us = reset;
  return out;
}

inline Outcome<FixedWindowState> DecideFixedWindow(const Policy& policy,
                                                   const FixedWindowState* stored, std::int64_t now,
                                                   std::int64_t cost, Decision& decision) {
  const std::int64_t limit = policy.limit;
  const WindowSpan span = WindowSpanAt(policy, now, stored);
  const std::int64_t at = span.now;
  const std::int64_t w = span.window;
  std::int64_t count = stored != nullptr && stored->window == w ? stored->count : 0;

  const bool allowed = cost == 0 || count + cost <= limit;
  Outcome<FixedWindowState> out;
  if (allowed && cost > 0) {
    count += cost;
    out.write = FixedWindowState{w, count};
  }
  const std::int64_t end = span.end - at;
  const std::int64_t retry = allowed ? 0 : (cost > limit ? -1 : end);
  const std::int64_t reset = count > 0 ? end : 0;
  SetDecision(decision, allowed, limit, limit - count, retry, reset);
  out.ttl_us = reset;
  return out;
}

}  // namespace floodgate::core
