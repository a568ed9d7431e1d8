#pragma once

// The zone names the zone database defines: tz= takes one of these, never a path.
//
// abseil's LoadTimeZone opens whatever file a name leads to (an absolute path, `../..`, a
// FIFO that blocks the thread for good) and caches every name it is asked, unknown ones
// too; so a name from a request reaches abseil only once it is on this list. The list is
// tzdata's own, `tzdata.zi` (the compiled database's source: a "Z NAME" line per zone and
// an "L TARGET NAME" line per link), read once: exactly the names of the zone files,
// without the tables, `posixrules`, `localtime` or the `posix/` and `right/` copies
// beside them (docs/algorithms.md, "Calendar windows").

#include <absl/container/flat_hash_set.h>
#include <absl/status/statusor.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace floodgate::core {

// The longest zone name taken: tzdata's longest is 32 bytes
// (America/Argentina/ComodRivadavia); a longer name is refused before any lookup.
inline constexpr std::size_t kMaxZoneNameBytes = 64;

class ZoneNames {
 public:
  // The zones and links `tzdata_zi` (the text of a tzdata.zi) defines, and UTC.
  static ZoneNames FromTzdataZi(std::string_view tzdata_zi);
  // <dir>/tzdata.zi's names; an error naming the file when it cannot be read.
  static absl::StatusOr<ZoneNames> Read(const std::string& dir);

  // Thread-safe (const).
  bool Contains(std::string_view name) const {
    return names_.contains(absl::string_view(name.data(), name.size()));
  }
  std::size_t size() const { return names_.size(); }

 private:
  absl::flat_hash_set<std::string> names_;
};

// The system's zone names: tzdata.zi in $TZDIR or /usr/share/zoneinfo, the directory
// abseil reads zones from. Read on first use and never again (`floodgate serve` asks at
// start, before it listens); when it cannot be read, only UTC (abseil's built-in zone),
// and `SystemZoneNamesError` says why. Thread-safe.
const ZoneNames& SystemZoneNames();
// Why the system's list holds only UTC; OK when it was read.
absl::Status SystemZoneNamesError();

}  // namespace floodgate::core
