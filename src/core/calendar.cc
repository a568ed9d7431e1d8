// Calendar windows: local days, ISO weeks, months and years of a zone, by abseil's time zones.
#include "core/calendar.h"

#include <absl/status/status.h>
#include <absl/time/civil_time.h>
#include <fmt/format.h>

#include <string>

#include "core/zone_names.h"

namespace floodgate::core {

namespace {

const absl::CivilDay kEpochDay(1970, 1, 1);
const absl::CivilDay kEpochMonday(1970, 1, 5);  // ISO weeks start on Monday

// Floor division: ordinals before 1970 (a zone east of UTC at the epoch) stay exact.
std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

absl::CivilDay FirstDay(Calendar unit, std::int64_t window) {
  switch (unit) {
    case Calendar::kWeek:
      return kEpochMonday + 7 * window;
    case Calendar::kMonth:
      return absl::CivilDay(absl::CivilMonth(1970, 1) + window);
    case Calendar::kYear:
      return absl::CivilDay(absl::CivilYear(1970) + window);
    case Calendar::kDay:
    case Calendar::kNone:
      break;
  }
  return kEpochDay + window;
}

}  // namespace

absl::StatusOr<absl::TimeZone> LoadZone(std::string_view name) {
  // Checked against the database's list before abseil sees the name: abseil would open
  // any path it leads to and cache the name even when it names nothing (zone_names.h).
  if (name.size() > kMaxZoneNameBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "tz is {} bytes; a zone name is at most {} (an IANA name such as Europe/Berlin)",
        name.size(), kMaxZoneNameBytes));
  }
  absl::TimeZone zone;
  if (!SystemZoneNames().Contains(name) || !absl::LoadTimeZone(std::string(name), &zone)) {
    return absl::InvalidArgumentError(
        fmt::format("unknown time zone \"{}\" (an IANA name such as Europe/Berlin, or UTC; "
                    "the zone database is the tzdata package)",
                    name));
  }
  return zone;
}

CalendarZone CalendarOf(const Policy& policy) {
  CalendarZone calendar{policy.calendar, absl::UTCTimeZone()};
  // A policy built without Policy::Validate may name anything: only a listed zone is
  // looked up.
  if (policy.calendar != Calendar::kNone && SystemZoneNames().Contains(policy.tz)) {
    absl::LoadTimeZone(policy.tz, &calendar.zone);
  }
  return calendar;
}

std::int64_t CalendarWindowOf(const CalendarZone& calendar, std::int64_t t_us) {
  const absl::CivilDay day =
      absl::ToCivilDay(absl::FromUnixMicros(t_us), calendar.zone);
  switch (calendar.unit) {
    case Calendar::kWeek:
      return FloorDiv(day - kEpochMonday, 7);
    case Calendar::kMonth:
      return absl::CivilMonth(day) - absl::CivilMonth(1970, 1);
    case Calendar::kYear:
      return absl::CivilYear(day) - absl::CivilYear(1970);
    case Calendar::kDay:
    case Calendar::kNone:
      break;
  }
  return day - kEpochDay;
}

std::int64_t CalendarStart(const CalendarZone& calendar, std::int64_t window) {
  const absl::TimeZone::TimeInfo midnight =
      calendar.zone.At(absl::CivilSecond(FirstDay(calendar.unit, window)));
  // SKIPPED: midnight falls in a gap, and `trans` is the first instant after it. REPEATED:
  // `pre` is the first of the two midnights. UNIQUE: pre is the one.
  const absl::Time start =
      midnight.kind == absl::TimeZone::TimeInfo::SKIPPED ? midnight.trans : midnight.pre;
  return absl::ToUnixMicros(start);
}

CalendarBounds CalendarBoundsAround(const CalendarZone& calendar, std::int64_t t_us) {
  CalendarBounds bounds;
  bounds.first = CalendarWindowOf(calendar, t_us) - 1;
  for (std::size_t i = 0; i < bounds.starts.size(); ++i) {
    bounds.starts[i] = CalendarStart(calendar, bounds.first + static_cast<std::int64_t>(i));
  }
  return bounds;
}

}  // namespace floodgate::core
