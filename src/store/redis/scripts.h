#pragma once

// The Lua scripts the store runs (from lua/: bodies, SHAs) and the handshake that loads them.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <hiredis/hiredis.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_kind.h"

namespace floodgate::redis {

// One script per algorithm, the batch script and the reservation script.
enum class ScriptId : int {
  kGcra,
  kTokenBucket,
  kSlidingLog,
  kSlidingWindow,
  kFixedWindow,
  kConcurrency,
  kBatch,
  kReservation,
};
inline constexpr int kScriptCount = 8;

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
// must be the primary), then SCRIPT LOAD of every script.
class Handshake {
 public:
  Handshake(const RedisStoreOptions& options, Scripts& scripts)
      : options_(options), scripts_(scripts) {}

  // The first command is AUTH, or a PING without a password: the connection sends it
  // alone, and its answer tells a server that wants a password before a script goes.
  std::vector<std::string> Commands() const;
  // Checks the answer to command `index`; a SCRIPT LOAD's answer is the script's SHA.
  absl::Status Check(std::string_view describe, std::size_t index, const redisReply& reply);

 private:
  const RedisStoreOptions& options_;
  Scripts& scripts_;
};

}  // namespace floodgate::redis
