// The Lua scripts the store runs and the handshake that loads them.
#include "store/redis/scripts.h"

#include <fmt/format.h>

#include <utility>

#include "store/redis/lua_sources.h"
#include "store/redis/resp.h"

namespace floodgate::redis {

namespace {

// lua/ assembled as described in lua_sources.h: one script per algorithm, one batch.
std::string AssembleScript(ScriptId id) {
  namespace l = lua;
  switch (id) {
    case ScriptId::kGcra:
      return l::SingleScript(l::k_gcra);
    case ScriptId::kTokenBucket:
      return l::SingleScript(l::k_token_bucket);
    case ScriptId::kSlidingLog:
      return l::SingleScript(l::k_sliding_log);
    case ScriptId::kSlidingWindow:
      return l::SingleScript(l::k_sliding_window);
    case ScriptId::kFixedWindow:
      return l::SingleScript(l::k_fixed_window);
    case ScriptId::kConcurrency:
      return l::SingleScript(l::k_concurrency);
    case ScriptId::kBatch:
      break;
    case ScriptId::kReservation:
      return l::DriverScript(std::string(l::k_take).append(l::k_reservation));
    case ScriptId::kNodeBatch:
      return l::NodeBatchScript();
  }
  return l::DriverScript(l::k_batch);
}

}  // namespace

ScriptId SingleScriptFor(core::StateKind kind) {
  using core::StateKind;
  switch (kind) {
    case StateKind::kGcra:
      return ScriptId::kGcra;
    case StateKind::kSmoothBucket:
    case StateKind::kIntervalBucket:
      return ScriptId::kTokenBucket;
    case StateKind::kSlidingLog:
      return ScriptId::kSlidingLog;
    case StateKind::kSlidingWindow:
      return ScriptId::kSlidingWindow;
    case StateKind::kFixedWindow:
      return ScriptId::kFixedWindow;
    case StateKind::kConcurrency:
      return ScriptId::kConcurrency;
  }
  return ScriptId::kGcra;
}

Batching BatchingFrom(const redisReply& script_load_reply) {
  return script_load_reply.type == REDIS_REPLY_STRING ? Batching::kPerNode : Batching::kPerSlot;
}

Scripts::Scripts() {
  for (int i = 0; i < kScriptCount; ++i) scripts_[i].body = AssembleScript(ScriptId(i));
}

std::vector<std::string> Handshake::Commands() const {
  std::vector<std::string> commands;
  std::string command;
  if (options_.password.empty()) {
    AppendCommand(command, {"PING"});
  } else if (options_.user.empty()) {
    AppendCommand(command, {"AUTH", options_.password});
  } else {
    AppendCommand(command, {"AUTH", options_.user, options_.password});
  }
  commands.push_back(std::exchange(command, {}));
  if (options_.db != 0) {
    AppendCommand(command, {"SELECT", std::to_string(options_.db)});
    commands.push_back(std::exchange(command, {}));
  }
  if (options_.sentinel) {  // the server a sentinel named must still be the primary
    AppendCommand(command, {"ROLE"});
    commands.push_back(std::exchange(command, {}));
  }
  const int scripts = options_.cluster ? kScriptCount : kScriptCount - 1;  // kNodeBatch last
  for (int i = 0; i < scripts; ++i) {
    AppendCommand(command, {"SCRIPT", "LOAD", scripts_.body(ScriptId(i))});
    commands.push_back(std::exchange(command, {}));
  }
  return commands;
}

absl::Status Handshake::Check(std::string_view describe, std::size_t index, const redisReply& reply,
                              Batching& batching) {
  const std::size_t auth = 1;  // AUTH, or PING
  const std::size_t select = options_.db != 0 ? 1 : 0;
  const std::size_t role = options_.sentinel ? 1 : 0;
  if (index == auth + select + role + static_cast<std::size_t>(ScriptId::kNodeBatch)) {
    batching = forced_.value_or(BatchingFrom(reply));
    if (reply.type == REDIS_REPLY_STRING) {
      scripts_.set_sha(ScriptId::kNodeBatch, std::string(TextOf(reply)));
    } else {
      node_batch_refusals_.fetch_add(1, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }
  if (reply.type == REDIS_REPLY_ERROR) {
    const std::string_view text = TextOf(reply);
    if (index == 0 && !options_.password.empty()) {
      return absl::PermissionDeniedError(
          fmt::format("redis at {} refused AUTH: {}", describe, text));
    }
    // The PING's NOAUTH; "unauthenticated" is how a server refuses a large request
    // from an unauthenticated client, should one still get that far.
    if (text.starts_with("NOAUTH") || text.find("unauthenticated") != std::string_view::npos) {
      return absl::PermissionDeniedError(
          fmt::format("redis at {} needs a password: {} (give it in the URL: {})", describe, text,
                      options_.unix_socket.empty() ? "redis://:PASSWORD@host:port"
                                                   : "redis+unix://:PASSWORD@/path"));
    }
    const char* step = index == 0                    ? "PING"
                       : index < auth + select        ? "SELECT"
                       : index < auth + select + role ? "ROLE"
                                                      : "SCRIPT LOAD";
    return absl::FailedPreconditionError(
        fmt::format("redis at {} refused {}: {}", describe, step, text));
  }
  if (role != 0 && index == auth + select) return CheckPrimary(describe, reply);
  if (index >= auth + select + role) {
    if (reply.type != REDIS_REPLY_STRING) {
      return absl::InternalError("SCRIPT LOAD did not answer with a SHA");
    }
    scripts_.set_sha(ScriptId(index - auth - select - role), std::string(TextOf(reply)));
  }
  return absl::OkStatus();
}

absl::Status CheckPrimary(std::string_view describe, const redisReply& role) {
  const std::string_view is = role.type == REDIS_REPLY_ARRAY && role.elements > 0 &&
                                      role.element[0]->type == REDIS_REPLY_STRING
                                  ? TextOf(*role.element[0])
                                  : std::string_view("no role");
  if (is == "master") return absl::OkStatus();
  // Unavailable: the sentinels are asked again (a failover moves the primary).
  return absl::UnavailableError(
      fmt::format("redis at {} is not the primary (ROLE: {})", describe, is));
}

}  // namespace floodgate::redis
