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
    case ScriptId::kUpstream:
      return std::string(l::k_upstream);
    case ScriptId::kOperate:
      return l::DriverScript(l::k_operate);
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

namespace {

HandshakeStep Step(const std::vector<std::string_view>& args,
                   std::function<absl::Status(const redisReply&)> check) {
  HandshakeStep step;
  AppendCommand(step.command, args);
  step.check = std::move(check);
  return step;
}

}  // namespace

void Handshake::Login(std::string_view describe, std::vector<HandshakeStep>& steps) const {
  const std::string where(describe);
  // A PING's or SELECT's answer is news only when it is an error.
  const auto refused_as = [this, where](std::string_view step) {
    return [this, where, step](const redisReply& reply) {
      return reply.type == REDIS_REPLY_ERROR ? Refused(where, step, reply) : absl::OkStatus();
    };
  };
  if (options_.password.empty()) {
    steps.push_back(Step({"PING"}, refused_as("PING")));
  } else {
    const auto auth = [where](const redisReply& reply) {
      if (reply.type != REDIS_REPLY_ERROR) return absl::OkStatus();
      return absl::PermissionDeniedError(
          fmt::format("redis at {} refused AUTH: {}", where, TextOf(reply)));
    };
    if (options_.user.empty()) {
      steps.push_back(Step({"AUTH", options_.password}, auth));
    } else {
      steps.push_back(Step({"AUTH", options_.user, options_.password}, auth));
    }
  }
  if (options_.db != 0) {
    steps.push_back(Step({"SELECT", std::to_string(options_.db)}, refused_as("SELECT")));
  }
}

void Handshake::ConfirmPrimary(std::string_view describe, std::vector<HandshakeStep>& steps) const {
  steps.push_back(Step({"ROLE"}, [this, where = std::string(describe)](const redisReply& reply) {
    return reply.type == REDIS_REPLY_ERROR ? Refused(where, "ROLE", reply)
                                           : CheckPrimary(where, reply);
  }));
}

void Handshake::LoadScripts(std::string_view describe, std::vector<HandshakeStep>& steps) {
  for (int i = 0; i < kScriptCount; ++i) {
    const ScriptId id(static_cast<ScriptId>(i));
    if (id == ScriptId::kNodeBatch) continue;
    steps.push_back(Step({"SCRIPT", "LOAD", scripts_.body(id)},
                         [this, id, where = std::string(describe)](const redisReply& reply) {
                           if (reply.type == REDIS_REPLY_ERROR) {
                             return Refused(where, "SCRIPT LOAD", reply);
                           }
                           if (reply.type != REDIS_REPLY_STRING) {
                             return absl::InternalError("SCRIPT LOAD did not answer with a SHA");
                           }
                           scripts_.set_sha(id, std::string(TextOf(reply)));
                           return absl::OkStatus();
                         }));
  }
}

void Handshake::LoadNodeBatch(std::function<void(Batching)> found,
                              std::vector<HandshakeStep>& steps) {
  steps.push_back(Step({"SCRIPT", "LOAD", scripts_.body(ScriptId::kNodeBatch)},
                       [this, found = std::move(found)](const redisReply& reply) {
                         found(forced_.value_or(BatchingFrom(reply)));
                         if (reply.type == REDIS_REPLY_STRING) {
                           scripts_.set_sha(ScriptId::kNodeBatch, std::string(TextOf(reply)));
                         } else {
                           node_batch_refusals_.fetch_add(1, std::memory_order_relaxed);
                         }
                         return absl::OkStatus();
                       }));
}

absl::Status Handshake::Refused(std::string_view describe, std::string_view step,
                                const redisReply& reply) const {
  const std::string_view text = TextOf(reply);
  // The PING's NOAUTH; "unauthenticated" is how a server refuses a large request from an
  // unauthenticated client, should one still get that far.
  if (text.starts_with("NOAUTH") || text.find("unauthenticated") != std::string_view::npos) {
    return absl::PermissionDeniedError(
        fmt::format("redis at {} needs a password: {} (give it in the URL: {})", describe, text,
                    options_.unix_socket.empty() ? "redis://:PASSWORD@host:port"
                                                 : "redis+unix://:PASSWORD@/path"));
  }
  return absl::FailedPreconditionError(
      fmt::format("redis at {} refused {}: {}", describe, step, text));
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
