#pragma once

// The Lua scripts the store runs (from lua/: bodies, SHAs) and the handshake that loads them.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <hiredis/hiredis.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_kind.h"

namespace floodgate::redis {

// One script per algorithm, the batch script, the reservation script, and (Redis Cluster
// only) the batch script for keys of several slots of one node.
enum class ScriptId : int {
  kGcra,
  kTokenBucket,
  kSlidingLog,
  kSlidingWindow,
  kFixedWindow,
  kConcurrency,
  kBatch,
  kReservation,
  kNodeBatch,
};
inline constexpr int kScriptCount = 9;

// What a connection's batches may span (docs/scaling.md): the keys of every slot of its
// server (a standalone server's or Sentinel's primary's: all of them; a cluster node's, by
// lua/node_batch.lua, which needs script flags, Redis >= 7.0), or the keys of one slot (a
// cluster node without them).
enum class Batching : std::uint8_t { kPerSlot, kPerNode };
// Detection, from the answer to SCRIPT LOAD of the node batch script: a SHA from a server
// that knows script flags; an error from one that does not (Redis < 7.0 compiles the
// shebang line as Lua, and fails).
Batching BatchingFrom(const redisReply& script_load_reply);

// The algorithm's own script, for a decision alone in its call.
ScriptId SingleScriptFor(core::StateKind kind);

// The scripts' bodies (assembled once) and their SHAs (learnt from SCRIPT LOAD during
// handshakes, on the I/O thread).
class Scripts {
 public:
  Scripts();
  const std::string& body(ScriptId id) const { return scripts_[Index(id)].body; }
  const std::string& sha(ScriptId id) const { return scripts_[Index(id)].sha; }
  void set_sha(ScriptId id, std::string sha) { scripts_[Index(id)].sha = std::move(sha); }

 private:
  struct Script {
    std::string body;
    std::string sha;
  };
  static std::size_t Index(ScriptId id) { return static_cast<std::size_t>(id); }
  std::array<Script, kScriptCount> scripts_;
};

// ROLE's answer names a primary ("master"); else why not. Redis Sentinel: no decision is
// ever sent to a server that is not (a replica's answers may be stale).
absl::Status CheckPrimary(std::string_view describe, const redisReply& role);

// A connection's handshake: AUTH (or PING), SELECT, ROLE (Redis Sentinel: the server
// must be the primary), then SCRIPT LOAD of every script (the node batch script on a
// cluster only).
class Handshake {
 public:
  // `forced`: tests only, a Batching to take instead of the detected one.
  Handshake(const RedisStoreOptions& options, Scripts& scripts,
            std::optional<Batching> forced = std::nullopt)
      : options_(options), scripts_(scripts), forced_(forced) {}

  // The first command is AUTH, or a PING without a password: the connection sends it
  // alone, and its answer tells a server that wants a password before a script goes.
  std::vector<std::string> Commands() const;
  // Checks the answer to command `index`; a SCRIPT LOAD's answer is the script's SHA. The
  // node batch script's tells the connection's `batching` (its refusal fails nothing).
  absl::Status Check(std::string_view describe, std::size_t index, const redisReply& reply,
                     Batching& batching);
  // Connections whose node refused the node batch script (Redis < 7.0 has no script
  // flags; a newer server refusing it is worth a look): they batch within one slot.
  std::uint64_t node_batch_refusals() const {
    return node_batch_refusals_.load(std::memory_order_relaxed);
  }

 private:
  const RedisStoreOptions& options_;
  Scripts& scripts_;
  const std::optional<Batching> forced_;
  std::atomic<std::uint64_t> node_batch_refusals_{0};
};

}  // namespace floodgate::redis
