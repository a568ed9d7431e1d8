#pragma once

// Each Lua script's arguments and replies, field by field: the one table of their layouts.
//
// Encode (encode.cc) sends the arguments in these orders and Decode* (decode.cc) reads the
// replies so; lua/README.md ("Calling contract") and the drivers' opening comments
// (lua/single.lua, batch.lua, node_batch.lua, reservation.lua) show each row as its fields
// joined by ", ". tests/redis_encode_test.cc checks all of them against this table.

#include <array>
#include <string_view>

namespace floodgate::redis::layout {

using Field = std::string_view;

// lua/single.lua: KEYS[1] = the decision's key.
inline constexpr std::array<Field, 6> kSingle = {"kind",      "now",   "limit",
                                                 "period_us", "burst", "cost"};
// lua/batch.lua and lua/reservation.lua send each distinct policy once, as p, then these
// per policy; the operations name a policy by its number 1..p.
inline constexpr std::array<Field, 4> kPolicy = {"kind", "limit", "period_us", "burst"};
// lua/batch.lua: g, then these per listed group (docs/multi.md), then kDecision per
// decision (KEYS[i] = decision i's key).
inline constexpr std::array<Field, 5> kGroup = {"first", "count", "mode", "shadow mask", "at"};
inline constexpr std::array<Field, 3> kDecision = {"policy", "now", "cost"};
// lua/node_batch.lua: these first (KEYS = {decision 1's key}), then lua/batch.lua's ARGV.
inline constexpr std::array<Field, 3> kNodeBatch = {"n", "slot marks", "keys 2..n"};
// lua/reservation.lua: n, then per operation its letter and its arguments. A reserve or a
// take has 2 KEYS (the limit's key, the record's), every other operation 1 (a settle: the
// record's; an acquire or a release: the concurrency key). 'a' and 'l' are 'A' at the
// server clock and 'L' at the server clock and 0.
inline constexpr std::array<Field, 5> kReserve = {"r", "policy", "now", "estimate", "hold_us"};
inline constexpr std::array<Field, 5> kTake = {"t", "policy", "now", "up_to", "lifetime_us"};
inline constexpr std::array<Field, 3> kSettle = {"s", "now", "actual"};
inline constexpr std::array<Field, 4> kAcquire = {"A", "policy", "now", "random"};
inline constexpr std::array<Field, 3> kAcquireNow = {"a", "policy", "random"};
inline constexpr std::array<Field, 4> kRelease = {"L", "now", "actual", "member"};
inline constexpr std::array<Field, 2> kReleaseNow = {"l", "member"};
// lua/operate.lua: KEYS[1] = the operated key; replies kDecisionReply, as lua/single.lua.
inline constexpr std::array<Field, 7> kOperate = {"kind",  "now",       "limit", "period_us",
                                                  "burst", "operation", "units"};
// lua/upstream.lua: KEYS = upstream's keys; these per key (ttl_s empty: only read). Replies the
// count after per key.
inline constexpr std::array<Field, 2> kCounter = {"hits", "ttl_s"};

// Replies: integers per decision (single, batch: then the clock it read, batch only), per
// operation (reservations: then the clock it read).
inline constexpr std::array<Field, 4> kDecisionReply = {"allowed", "remaining", "retry_after_us",
                                                        "reset_after_us"};
inline constexpr std::array<Field, 7> kOperationReply = {
    "outcome", "allowed", "limit", "remaining", "retry_after_us", "reset_after_us", "acquired_at"};

}  // namespace floodgate::redis::layout
