#pragma once

// Calendar windows (tz=ZONE): which local day/week/month/year holds an instant, and its bounds.
//
// docs/algorithms.md, "Calendar windows (`tz=ZONE`)". A window is named by its ordinal,
// counted from the one holding 1970-01-01 (days; ISO weeks from Monday 1970-01-05; months
// from January 1970; years from 1970), so window w-1 is the one before w exactly as with
// epoch-aligned windows, and the window algorithms' state (w, counts) keeps its layout.

#include <absl/status/statusor.h>
#include <absl/time/time.h>
#include <floodgate/policy.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace floodgate::core {

// The zone of tz=NAME from the system's zone database (Debian's tzdata), or an error
// naming it. Only a name on the database's list is looked up (zone_names.h).
absl::StatusOr<absl::TimeZone> LoadZone(std::string_view name);

// A policy's calendar: the unit and the zone, loaded once by whoever holds it.
struct CalendarZone {
  Calendar unit = Calendar::kNone;
  absl::TimeZone zone;
};
// The policy's calendar; unit kNone when it has no tz. A name the database does not
// list (Policy::Validate refuses it) counts in UTC, without a lookup.
CalendarZone CalendarOf(const Policy& policy);

// The ordinal of the window holding `t_us` (µs since the epoch).
std::int64_t CalendarWindowOf(const CalendarZone& calendar, std::int64_t t_us);
// start(w): the instant of the window's first civil midnight in the zone, or the first
// instant after the gap where that midnight does not exist; µs since the epoch.
std::int64_t CalendarStart(const CalendarZone& calendar, std::int64_t window);

// What a Redis script needs to choose the window by its own clock (lua/common.lua
// calendar_window): the ordinal `first` of the window before the one holding `t_us`, and
// the starts of windows first .. first + 4. A server clock within a window of the
// caller's finds its window w among first .. first + 2, with end(w + 1) still known.
struct CalendarBounds {
  std::int64_t first = 0;
  std::array<std::int64_t, 5> starts{};
};
CalendarBounds CalendarBoundsAround(const CalendarZone& calendar, std::int64_t t_us);

}  // namespace floodgate::core
