// Reservation and lease ids: made and parsed (docs/reservations.md, docs/leases.md).
#include "store/redis/ids.h"

#include <absl/strings/escaping.h>
#include <fmt/format.h>

#include <charconv>
#include <random>

#include "store/redis/cluster.h"

namespace floodgate::redis {

absl::BitGen IdGenerator() {
  std::random_device os;
  std::seed_seq seed{os(), os(), os(), os(), os(), os(), os(), os()};
  return absl::BitGen(seed);
}

std::string ReservationId(int slot, std::uint64_t random) {
  return fmt::format("{:04x}{:016x}", slot, random);
}

std::string RecordKey(std::string_view prefix, int slot, std::uint64_t random) {
  return fmt::format("{}res:{{{}}}:{:016x}", prefix, SlotTag(slot), random);
}

std::string LeaseRandom(std::uint64_t random) { return fmt::format("{:016x}", random); }

std::string LeaseId(std::string_view key, std::string_view random, const Policy& policy,
                    std::int64_t acquired_at) {
  return fmt::format("{}.{}.{}.{}.{}",
                     absl::WebSafeBase64Escape(absl::string_view(key.data(), key.size())), random,
                     policy.period.count(), policy.limit, acquired_at);
}

absl::StatusOr<SettleTarget> ParseSettleId(std::string_view id) {
  if (const std::size_t dot = id.find('.'); dot != std::string_view::npos) {  // a lease
    LeaseRef lease;
    if (!absl::WebSafeBase64Unescape(absl::string_view(id.data(), dot), &lease.key) ||
        lease.key.empty() || lease.key.size() > kMaxKeyBytes || dot + 1 == id.size()) {
      return absl::NotFoundError("unknown lease: not an id this store made");
    }
    lease.member = std::string(id.substr(dot + 1));
    return lease;
  }
  unsigned slot = 0;
  std::uint64_t random = 0;
  // Lowercase digits only, as ReservationId writes them and as memory:// reads its ids:
  // from_chars alone takes 'A'-'F' too, and an id written two ways would settle one record.
  const auto hex = [](std::string_view text, auto& value) {
    if (text.find_first_not_of("0123456789abcdef") != std::string_view::npos) return false;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    return error == std::errc() && end == text.data() + text.size();
  };
  if (id.size() != 20 || !hex(id.substr(0, 4), slot) || !hex(id.substr(4), random) ||
      slot >= static_cast<unsigned>(kClusterSlots)) {
    return absl::NotFoundError("unknown reservation: not an id this store made");
  }
  return ReservationRef{static_cast<int>(slot), random};
}

}  // namespace floodgate::redis
