#pragma once

// Pure: a chunk of units -> one EVALSHA/EVAL call (after ASKING if asked); decode.h's mirror.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "store/redis/scripts.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// What a call carries of its script: the SHA (EVALSHA), or the body (EVAL: after
// NOSCRIPT, Redis restarted or flushed its scripts; EVAL caches it for the next EVALSHA).
enum class ScriptForm : std::uint8_t { kSha, kBody };
// After an ASK redirect ASKING goes first, in the same write: it covers only the next
// command on its connection (the slot is being imported by the node asked).
enum class Asking : std::uint8_t { kNo, kYes };

struct EncodedCall {
  std::string command;           // RESP: ASKING (when asked for), then the script call
  std::size_t asking_bytes = 0;  // where the script call starts in `command`
  std::size_t keys = 0;          // the call's KEYS: its items, and reservations' records
  bool across_slots = false;     // lua/node_batch.lua: keys of several slots of one node
};

// The chunk goes as one call, in its script's layout (script_layout.h): reservations (all
// of them, or none) by lua/reservation.lua; counters (all, or none) by lua/upstream.lua; a lone SingleCall unit by its algorithm's
// script; anything else by lua/batch.lua, through lua/node_batch.lua when its units'
// route.slot differ (adjacent per slot, the batcher's order: a cluster node's batch).
EncodedCall Encode(std::span<const UnitPtr> chunk, const Scripts& scripts, ScriptForm form,
                   Asking asking);

// Decided by the algorithm's own script, whose reply carries no clock (decode.h).
inline bool SingleCall(std::span<const UnitPtr> chunk) {
  return chunk.size() == 1 && chunk[0]->single();
}
// Answered as a single decision is (lua/operate.lua replies as lua/single.lua does): a
// single decision's call, or an operation's, which is always alone in its call.
inline bool AnsweredAsSingle(std::span<const UnitPtr> chunk) {
  return SingleCall(chunk) || chunk[0]->operates();
}

}  // namespace floodgate::redis
