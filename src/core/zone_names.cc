// The zone names the zone database defines, from tzdata's tzdata.zi, read once.
#include "core/zone_names.h"

#include <absl/status/status.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "common/strings.h"

namespace floodgate::core {

namespace {

// tzdata.zi is about 110 KB; a file far larger is not one.
constexpr std::streamsize kMaxTzdataZiBytes = 4 << 20;

// What SystemZoneNames reads, once.
struct SystemList {
  ZoneNames names;
  absl::Status error;
};

const SystemList& System() {
  static const SystemList list = [] {
    const char* tzdir = std::getenv("TZDIR");  // where abseil looks, so here too
    const std::string dir = tzdir != nullptr && *tzdir != '\0' ? tzdir : "/usr/share/zoneinfo";
    absl::StatusOr<ZoneNames> read = ZoneNames::Read(dir);
    if (read.ok()) return SystemList{*std::move(read), absl::OkStatus()};
    return SystemList{ZoneNames::FromTzdataZi(""), read.status()};
  }();
  return list;
}

}  // namespace

ZoneNames ZoneNames::FromTzdataZi(std::string_view tzdata_zi) {
  ZoneNames zones;
  zones.names_.insert("UTC");  // abseil's own, without a file
  for (const absl::string_view line : absl::StrSplit(ToAbsl(tzdata_zi), '\n')) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    // "Z NAME STDOFF RULES FORMAT [UNTIL]"; "L TARGET NAME".
    if (fields.size() >= 2 && fields[0] == "Z") zones.names_.emplace(fields[1]);
    if (fields.size() == 3 && fields[0] == "L") zones.names_.emplace(fields[2]);
  }
  return zones;
}

absl::StatusOr<ZoneNames> ZoneNames::Read(const std::string& dir) {
  const std::string path = dir + "/tzdata.zi";
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(kMaxTzdataZiBytes) + 1, '\0');
  if (in.is_open()) in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in.is_open() || in.bad()) {
    return absl::NotFoundError(
        fmt::format("cannot read the zone database's list {} (the tzdata package)", path));
  }
  if (in.gcount() > kMaxTzdataZiBytes) {
    return absl::InvalidArgumentError(
        fmt::format("{} is over {} bytes: not tzdata's list of zones", path, kMaxTzdataZiBytes));
  }
  text.resize(static_cast<std::size_t>(in.gcount()));
  return FromTzdataZi(text);
}

const ZoneNames& SystemZoneNames() { return System().names; }

absl::Status SystemZoneNamesError() { return System().error; }

}  // namespace floodgate::core
