#pragma once

// The per-lane hot path: enqueue, flush, send, decode, NOSCRIPT -> EVAL, deadlines, stalls.

#include <floodgate/redis_store.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <string_view>
#include <vector>

#include "store/redis/counters.h"
#include "store/redis/dispatch.h"
#include "store/redis/encode.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"
#include "store/redis/resp.h"
#include "store/redis/scripts.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// Whether every script call is followed by WAIT (replicas.h): for wait_replicas, and on
// Redis Sentinel (WAIT 0), because a replica refuses it.
enum class Acknowledge : std::uint8_t { kNo, kByWait };

// The owner of each lane's queue, calls out and deadlines (node.h). Enqueue runs on any
// thread; everything else on the I/O thread.
class Batcher {
 public:
  Batcher(boost::asio::io_context& io, const RedisStoreOptions& options, const Scripts& scripts,
          Outcomes& outcomes, Counters& counters, CallErrors& errors, Acknowledge acknowledge)
      : io_(io),
        options_(options),
        scripts_(scripts),
        outcomes_(outcomes),
        counters_(counters),
        errors_(errors),
        acknowledge_(acknowledge) {}

  // Any thread. Queues a unit on a lane and has the I/O thread flush it.
  void Enqueue(Lane& lane, UnitPtr unit);
  // I/O thread. Queues a unit on a lane; the caller flushes the lane after it queued all.
  void Stage(Lane& lane, UnitPtr unit);
  // Sends what queued up since the last flush, batched.
  void Flush(Lane& lane);
  // Watches `unit`'s deadline on `lane` (a unit waiting for the lane's node to connect).
  void Watch(Lane& lane, const UnitPtr& unit);
  // Closing: answers with `status` every unit queued on the lane or watched by it, and
  // stops its sweep.
  void Drain(Lane& lane, const absl::Status& status);
  // ASK: one call with ASKING first, to the lane of the node importing the slot.
  void SendAsked(Lane& lane, std::vector<UnitPtr> chunk);
  // Keeps the lane's timeout sweep running while it has anything to watch.
  void ArmSweep(Lane& lane);
  absl::Status TimeoutError() const;

 private:
  // With batching on, at most this many script calls are out per connection; decisions
  // arriving meanwhile wait in the queue and leave together, in as few calls as possible,
  // when a call returns. Under load that fills the batches; at light load a decision
  // still leaves at once. With batching off (batch=1) calls are only pipelined.
  static constexpr int kCallsOutWhenBatching = 2;

  void Send(Lane& lane, std::vector<UnitPtr> chunk, ScriptForm form, Asking asking);
  void OnReply(Lane& lane, std::vector<UnitPtr> chunk, ScriptForm form, Asking asking,
               absl::StatusOr<Reply> reply);
  void Sweep(Lane& lane);
  Blame BlameForTimeout(const Lane& lane, Steady::time_point now) const;

  boost::asio::io_context& io_;
  const RedisStoreOptions& options_;
  const Scripts& scripts_;
  Outcomes& outcomes_;
  Counters& counters_;
  CallErrors& errors_;
  const Acknowledge acknowledge_;
};

}  // namespace floodgate::redis
