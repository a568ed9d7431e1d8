#pragma once

// The Lua scripts the store runs (from lua/: bodies, SHAs) and the handshake that loads them.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <hiredis/hiredis.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_kind.h"
#include "store/redis/connection.h"

namespace floodgate::redis {

// One script per algorithm, the batch script, the reservation script, (Redis Cluster only)
// the batch script for keys of several slots of one node, and upstream's counters.
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
  kUpstream,  // lua/upstream.lua: envoyproxy/ratelimit's counters (Store::Count)
  kOperate,   // lua/operate.lua: reset, refund, penalize (Store::Operate)
};
inline constexpr int kScriptCount = 11;

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

// A connection's handshake, as steps that each carry the check of their answer
// (connection.h): AUTH (or PING) and SELECT, then what the topology asks for (Redis
// Sentinel: ROLE, the server must be the primary), SCRIPT LOAD of every script, and on a
// cluster the node batch script's too. The topology puts the steps together
// (LaneEvents::HandshakeOf, node.h). The checks run on the I/O thread.
class Handshake {
 public:
  // `forced`: tests only, a Batching to take instead of the detected one.
  Handshake(const RedisStoreOptions& options, Scripts& scripts,
            std::optional<Batching> forced = std::nullopt)
      : options_(options), scripts_(scripts), forced_(forced) {}

  // AUTH, or a PING without a password: the connection sends it alone, and its answer
  // tells a server that wants a password before a script goes. Then SELECT, unless db 0.
  void Login(std::string_view describe, std::vector<HandshakeStep>& steps) const;
  // ROLE, whose answer must name a primary (CheckPrimary).
  void ConfirmPrimary(std::string_view describe, std::vector<HandshakeStep>& steps) const;
  // SCRIPT LOAD of every script but the node batch script; each answer is its SHA.
  void LoadScripts(std::string_view describe, std::vector<HandshakeStep>& steps);
  // SCRIPT LOAD of the node batch script: its answer tells the connection's Batching,
  // handed to `found`; its refusal fails nothing.
  void LoadNodeBatch(std::function<void(Batching)> found, std::vector<HandshakeStep>& steps);
  // Connections whose node refused the node batch script (Redis < 7.0 has no script
  // flags; a newer server refusing it is worth a look): they batch within one slot.
  std::uint64_t node_batch_refusals() const {
    return node_batch_refusals_.load(std::memory_order_relaxed);
  }

 private:
  // A refusal of `step` (not AUTH): a server that wants a password, or else the step.
  absl::Status Refused(std::string_view describe, std::string_view step,
                       const redisReply& reply) const;

  const RedisStoreOptions& options_;
  Scripts& scripts_;
  const std::optional<Batching> forced_;
  std::atomic<std::uint64_t> node_batch_refusals_{0};
};

}  // namespace floodgate::redis
