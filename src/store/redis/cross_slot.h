#pragma once

// Multi-decisions across Cluster slots (docs/multi.md): reserve in order, unwind, release.

#include <absl/container/inlined_vector.h>
#include <floodgate/multi.h>
#include <floodgate/redis_store.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/counters.h"
#include "store/redis/dispatch.h"
#include "store/redis/outcomes.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

class CrossSlot {
 public:
  CrossSlot(const RedisStoreOptions& options, Counters& counters, Outcomes& outcomes,
            Dispatcher& dispatcher)
      : options_(options), counters_(counters), outcomes_(outcomes), dispatcher_(dispatcher) {}

  // Any thread. One slot (always, standalone) is the whole multi-decision in one call.
  void Submit(const MultiRequest& request, MultiCallback done);

 private:
  // A multi-decision on its way: its items (keys and names owned here), the answer being
  // put together, and on a cluster the slots it spans, reserved in ascending order.
  // A multi-decision's few items are held in place (absl::InlinedVector): allocations
  // were a third of the client's CPU per multi-decision.
  using Indexes = absl::InlinedVector<std::size_t, 4>;
  struct MultiState {
    std::string names;                        // the items' names, one after another
    absl::InlinedVector<CheckItem, 4> items;  // their keys point into redis_keys, names into names
    absl::InlinedVector<std::string, 4> redis_keys;
    std::optional<std::int64_t> now_us;
    Steady::time_point deadline;
    MultiCallback done;
    absl::InlinedVector<Decision, 4> decisions;  // what each item's store call said
    MultiDecision::Indexes unknown;
    bool degraded = false;
    // Across cluster slots (I/O thread only).
    absl::InlinedVector<Indexes, 1> slots;             // item indexes, slot by ascending slot
    std::size_t next = 0;                              // the slot being reserved
    absl::InlinedVector<std::int64_t, 1> reserved_at;  // the time each reserved slot decided at
    int outstanding = 0;                               // calls still out while unwinding
  };
  using MultiPtr = std::shared_ptr<MultiState>;

  bool AnswerFromDenials(MultiState& m, Steady::time_point now);
  static UnitPtr MakeUnit(const MultiState& m, const Indexes& indexes, Operation op,
                          Steady::time_point deadline);
  void ReserveNext(MultiPtr m);
  void Unwind(MultiPtr m);
  // `done(indexes)` makes the callback of the release of those items.
  template <class Done>
  std::vector<UnitPtr> Releases(const MultiState& m, const Done& done);
  static std::size_t IndexOf(const MultiState& m, std::string_view redis_key);
  static void Finish(MultiState& m, bool allowed);
  void Abort(MultiPtr m, const absl::Status& status);

  const RedisStoreOptions& options_;
  Counters& counters_;
  Outcomes& outcomes_;
  Dispatcher& dispatcher_;
};

}  // namespace floodgate::redis
