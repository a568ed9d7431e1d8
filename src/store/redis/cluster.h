#pragma once

// Redis Cluster's routing rules as pure functions: key slots, CLUSTER SLOTS, redirects.
//
// Which slot a key lives in, what a CLUSTER SLOTS reply says, and what a redirect error asks for.

#include <absl/status/statusor.h>
#include <floodgate/redis_store.h>
#include <hiredis/hiredis.h>

#include <optional>
#include <string_view>
#include <vector>

namespace floodgate::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16 (XMODEM) of the key, or of its hash tag (the text between the first '{' and the
// next '}', when not empty), modulo 16384: the rule every Redis Cluster client follows.
int SlotOf(std::string_view key);

// A short string whose slot is `slot` (0..16383): "{<it>}" in a key puts the key on that
// slot, next to another key whose slot is known (a reservation's record beside its limit's
// key). The table is computed once, on first use, and never changes.
std::string_view SlotTag(int slot);

struct SlotRange {
  int first = 0;
  int last = 0;  // inclusive
  RedisEndpoint primary;
};

// A CLUSTER SLOTS reply as slot ranges with their primaries. A primary announced with
// an empty or NULL host lives on the host that was asked (`asked_host`); one announced
// as "?" cannot be reached, and its ranges are left out.
absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(const redisReply& reply,
                                                         std::string_view asked_host);

struct Redirect {
  enum class Kind { kMoved, kAsk };
  Kind kind;
  int slot;
  RedisEndpoint target;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381"; nullopt for anything else.
// "MOVED 3999 :6381" (an unknown endpoint) gives an empty host: the one that answered.
std::optional<Redirect> ParseRedirect(std::string_view error);

}  // namespace floodgate::redis
