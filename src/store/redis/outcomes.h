#pragma once

// Answering a unit: Redis's answer or on_error's, with breaker, denial cache and counters.

#include <absl/status/statusor.h>
#include <floodgate/memory_store.h>
#include <floodgate/multi.h>
#include <floodgate/redis_store.h>

#include <optional>
#include <span>

#include "store/redis/counters.h"
#include "store/redis/denial_cache.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// Whom a failure is charged to. The breaker hears only Redis's: a decision that timed out
// in this process's own queue, or behind its own commands while Redis kept answering them,
// says the client asked for more than fits in the timeout, not that Redis failed; counted
// apart (backlog_timeouts), it must not open the breaker for every other client.
enum class Blame { kRedis, kOwnBacklog };

// Thread-safe where noted; Complete and CompleteUnit run where a unit is answered (the
// I/O thread, or a submitting thread for an unconnected standalone store).
class Outcomes {
 public:
  Outcomes(const RedisStoreOptions& options, Counters& counters);

  // A denial Redis gave recently for the same request (see DenialCache). Thread-safe.
  std::optional<Decision> CachedDenial(std::string_view redis_key, const Policy& policy,
                                       std::int64_t cost, Steady::time_point now);

  // Answers a single decision or a reservation's operation once: Redis's answer, or
  // on_error's. A group gets an error through CompleteUnit.
  void Complete(Unit& unit, absl::StatusOr<Decision> result, Blame blame = Blame::kRedis);
  // A group's answer, or its failure (answered by on_error for the whole multi-decision,
  // which only its caller can do: see AnswerMulti).
  void CompleteUnit(Unit& unit, absl::StatusOr<UnitResult> result, Blame blame = Blame::kRedis);
  // The breaker refused the unit. Not a new failure (the breaker's own refusal must not
  // keep it open): answered as on_error says, at memory speed.
  void AnswerWhileOpen(Unit& unit);

  // What on_error answers for one item when the store cannot (fail_open, fail_closed).
  Decision OnErrorAnswer(const Policy& policy, std::int64_t cost) const;
  // What on_error answers for a whole multi-decision that failed; counted as degraded.
  MultiDecision AnswerMulti(std::span<const CheckItem> items, std::optional<std::int64_t> now_us);

  // The on_error=local store's counters (RedisStore::Stats).
  StoreStats LocalStats() const { return local_.Stats(); }

 private:
  // A settle is not decided by on_error: the key would be charged twice or not at all.
  static absl::Status SettleFailed(const absl::Status& status);
  // An operation (Store::Operate) whose call failed: an error, never on_error's answer.
  static absl::Status OperateFailed(const absl::Status& status);
  // on_error's answer for a unit: a decision, or a counter's count (Unit::Answer reads it).
  Decision Fallback(Unit& unit);
  // fail_open: 0 (nothing counted), fail_closed: the largest count, local: memory://'s.
  std::int64_t CountFallback(const Unit& unit, std::int64_t ttl_s);
  void RememberDenial(const Unit& unit, const Item& item, const Decision& d,
                      Steady::time_point now);
  void CountFailure(Unit& unit, const absl::Status& status, Steady::time_point now, Blame blame);

  const RedisStoreOptions& options_;
  Counters& counters_;
  DenialCache denials_;
  MemoryStore local_;
};

}  // namespace floodgate::redis
