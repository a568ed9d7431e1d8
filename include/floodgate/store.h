#pragma once

// Store: the interface every store implements, the request types, and OpenStore by URL.

#include <absl/functional/any_invocable.h>
#include <absl/status/statusor.h>
#include <floodgate/decision.h>
#include <floodgate/multi.h>
#include <floodgate/policy.h>
#include <floodgate/reservation.h>
#include <floodgate/time.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate {

struct DecideRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;
  std::int64_t cost = 1;  // 0..kMaxCost; 0 is a peek
  // Decision time; the store's own clock when unset (Redis: the server's TIME).
  std::optional<TimePoint> now;
};

// envoyproxy/ratelimit's counter (docs/envoy.md, "Shared counters"): the integer at `key`
// incremented by `hits` and given `ttl`, as one atomic step (upstream's INCRBY and EXPIRE,
// which it pipelines), answering the count after. A `ttl` of 0 only reads the count (upstream's
// GET: nothing is written, an absent key counts 0).
struct CountRequest {
  // 1..kMaxCounterKeyBytes bytes, binary-safe; the whole key: the store adds no prefix or tag
  // (upstream's replicas must find the same key).
  std::string_view key;
  std::int64_t hits = 1;           // 0..kMaxCost
  std::chrono::seconds ttl{0};     // 0..kMaxCounterTtl; 0 reads only
  std::optional<TimePoint> now;    // when the TTL starts (memory://); Redis keeps its own clock
};
// Upstream's keys carry the descriptor's values and a prefix: longer than kMaxKeyBytes in
// practice (paths, header values), still bounded.
inline constexpr std::size_t kMaxCounterKeyBytes = 4096;
// Upstream's longest unit (a YEAR) plus any jitter worth having.
inline constexpr std::chrono::seconds kMaxCounterTtl{10 * 365 * 24 * 3600};

// The count after, and whether the store answered without its backend (on_error: fail_open
// answers 0, fail_closed the largest count, local the in-process store's count).
struct CountAnswer {
  std::int64_t count = 0;
  bool degraded = false;
};
using CountCallback = absl::AnyInvocable<void(absl::StatusOr<CountAnswer>)>;

// Operating a key (docs/algorithms.md, "Operating a key"): what an operator or the
// application does to one key under one policy.
enum class KeyOperation : std::uint8_t {
  kReset,     // the key's state gone, its block too: the next decision sees a fresh key
  kRefund,    // up to `units` given back, as if they had not been admitted; never lifts a block
  kPenalize,  // `units` charged unconditionally, even past the limit
};
std::string_view KeyOperationName(KeyOperation op);  // "reset", "refund", "penalize"

struct OperateRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;         // any algorithm but concurrency (a lease is given back by Release)
  KeyOperation operation = KeyOperation::kReset;
  std::int64_t units = 0;  // refund, penalize: 1..kMaxCost; reset: 0
  // The operation's time; the store's own clock when unset (Redis: the server's TIME).
  std::optional<TimePoint> now;
};

struct StoreStats {
  std::uint64_t keys = 0;          // keys held, including expired ones not yet reclaimed
  std::uint64_t evictions = 0;     // live keys dropped to stay under max_keys
  std::uint64_t expired = 0;       // expired keys reclaimed
  std::uint64_t reservations = 0;  // reservations held, including expired ones not yet reclaimed
};

// Receive the result of an asynchronous decision or reservation, exactly once.
using DecisionCallback = absl::AnyInvocable<void(absl::StatusOr<Decision>)>;
using ReservationCallback = absl::AnyInvocable<void(absl::StatusOr<Reservation>)>;

// Where limiter state lives. Implementations fetch and save state; the semantics are
// the pure functions of src/core, identical for every store.
class Store {
 public:
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Thread-safe. Validates the request (key size, cost range, policy ranges), then
  // decides atomically: no other decision on the same key interleaves.
  absl::StatusOr<Decision> Decide(const DecideRequest& request);

  // Thread-safe. Decide(DecideRequest{key, policy.policy(), cost, now}) under a policy whose
  // checks ran once, in PreparedPolicy::Prepare: the key, cost and time are checked as
  // Decide checks them, the policy is neither checked again nor copied.
  absl::StatusOr<Decision> Decide(std::string_view key, const PreparedPolicy& policy,
                                  std::int64_t cost, std::optional<TimePoint> now);

  // Thread-safe. The same decision, answered through `done`: before returning, or later
  // on the store's I/O thread (keep `done` short there). The request's key is copied;
  // it need not outlive the call. A store without I/O decides inline.
  void DecideAsync(const DecideRequest& request, DecisionCallback done);

  // Thread-safe. Several limits decided at one time, all or nothing (docs/multi.md):
  // validates the request (ValidateMultiRequest), then decides atomically: no other
  // decision on the items' keys interleaves (on a Redis Cluster, across slots, and for
  // Redis items that hold reservations or leases, see docs/multi.md and docs/leases.md
  // for the one bound). A concurrency item at cost 1 acquires a lease, an item with a
  // hold reserves its cost (MultiDecision::held).
  absl::StatusOr<MultiDecision> DecideAll(const MultiRequest& request);

  // Thread-safe. The same, answered through `done` as DecideAsync answers; the items'
  // keys and names are copied.
  void DecideAllAsync(const MultiRequest& request, MultiCallback done);

  // Thread-safe. A decision at cost = estimate that, when allowed, holds a reservation
  // until `hold` has passed (docs/reservations.md). ResourceExhausted when the store
  // holds as many reservations as it may; Unimplemented for a store without them.
  absl::StatusOr<Reservation> Reserve(const ReserveRequest& request);

  // Thread-safe. Charges a reservation's key `actual` instead of its estimate, at most
  // once: NotFound for an id that is unknown, settled already or expired (nothing
  // changes). Answers the key's peek after the settle.
  absl::StatusOr<Decision> Settle(const SettleRequest& request);

  // Thread-safe. The same, answered through `done` as DecideAsync answers; the key and
  // id are copied.
  void ReserveAsync(const ReserveRequest& request, ReservationCallback done);
  void SettleAsync(const SettleRequest& request, DecisionCallback done);

  // Thread-safe. take(k, δ) (TakeRequest says what it answers): a reservation of up to
  // `up_to` units, settled with Settle like any other. Unimplemented for a store without it.
  absl::StatusOr<Reservation> Take(const TakeRequest& request);
  void TakeAsync(const TakeRequest& request, ReservationCallback done);

  // Thread-safe. Leases (docs/leases.md): Acquire is Reserve(key, policy, 1, lease time)
  // under a concurrency policy, Release is Settle(id, 0); same errors (NotFound for an id
  // unknown, released already or expired).
  absl::StatusOr<Lease> Acquire(const AcquireRequest& request);
  absl::StatusOr<Decision> Release(const ReleaseRequest& request);
  void AcquireAsync(const AcquireRequest& request, ReservationCallback done);
  void ReleaseAsync(const ReleaseRequest& request, DecisionCallback done);

  // Thread-safe. Operates on a key (OperateRequest) atomically, as a decision, and answers the
  // key's peek (cost 0) right after it. Unimplemented for a store without it.
  absl::StatusOr<Decision> Operate(const OperateRequest& request);
  void OperateAsync(const OperateRequest& request, DecisionCallback done);

  // Thread-safe. envoyproxy/ratelimit's counter (CountRequest), answered as DecideAsync
  // answers; the key is copied. Unimplemented for a store without it.
  absl::StatusOr<CountAnswer> Count(const CountRequest& request);
  void CountAsync(const CountRequest& request, CountCallback done);

  // Thread-safe.
  virtual StoreStats Stats() const = 0;

  // The store's URL with its effective options, for logs and the demo page.
  virtual std::string Describe() const = 0;

  // Answers every decision still in flight (Cancelled) and stops talking to any backend;
  // later decisions get what the store answers when its backend fails. Call it before
  // destroying what pending callbacks use. Idempotent. A store without I/O has nothing
  // to do.
  virtual void Close() {}

  // Capabilities a front end asks of any store; the defaults fit a store without I/O.

  // Whether DecideAsync() and DecideAllAsync() always answer before returning, so a
  // caller may call Decide() / DecideAll() instead and skip wrapping its continuation
  // for a hand-off that never happens. False unless the store promises it.
  virtual bool AnswersInline() const { return false; }

  // Thread-safe. Whether the store's backend answers now (what /readyz asks); a store
  // without a backend always does.
  virtual bool Ping() { return true; }

  // Thread-safe. Appends the store's own counters beyond Stats() in the Prometheus text
  // format (names prefixed floodgate_), as /metrics shows them; none by default.
  virtual void AppendMetrics(std::string& out) const { (void)out; }

 protected:
  // Called by Decide() with a request that passed ValidateRequest().
  virtual absl::StatusOr<Decision> DecideValidated(const DecideRequest& request) = 0;
  // Called by Decide(key, PreparedPolicy, ...) once its checks passed; by default
  // DecideValidated with the policy copied into a DecideRequest. A store that decides in
  // process overrides it to decide without that copy.
  virtual absl::StatusOr<Decision> DecidePreparedValidated(std::string_view key,
                                                           const Policy& policy, std::int64_t cost,
                                                           std::optional<TimePoint> now);
  // Called by DecideAsync() with a valid request; by default decides inline.
  virtual void DecideAsyncValidated(const DecideRequest& request, DecisionCallback done) {
    done(DecideValidated(request));
  }
  // Called by DecideAll() / DecideAllAsync() with a request that passed
  // ValidateMultiRequest(); the asynchronous one decides inline by default.
  virtual absl::StatusOr<MultiDecision> DecideAllValidated(const MultiRequest& request) = 0;
  virtual void DecideAllAsyncValidated(const MultiRequest& request, MultiCallback done) {
    done(DecideAllValidated(request));
  }
  // Whether DecideAllValidated() holds a multi-decision's reservations and leases itself,
  // in the same atomic step as its other items. When not, such a request is decided in
  // steps (docs/leases.md, "In a multi-decision"): the holding items are reserved, then
  // the other items decided, and the reservations released if the request is denied.
  virtual bool HoldsInOneStep() const { return false; }
  // Called by Reserve() / Settle() with a request that passed ValidateReserveRequest() /
  // ValidateSettleRequest(). A store without reservations answers Unimplemented.
  virtual absl::StatusOr<Reservation> ReserveValidated(const ReserveRequest& request);
  // Called by Take() / TakeAsync() with a request that passed ValidateTakeRequest().
  virtual absl::StatusOr<Reservation> TakeValidated(const TakeRequest& request);
  virtual void TakeAsyncValidated(const TakeRequest& request, ReservationCallback done) {
    done(TakeValidated(request));
  }
  virtual absl::StatusOr<Decision> SettleValidated(const SettleRequest& request);
  // Called by Count() / CountAsync() with a request that passed ValidateCountRequest(); the
  // asynchronous one answers inline by default.
  virtual absl::StatusOr<CountAnswer> CountValidated(const CountRequest& request);
  virtual void CountAsyncValidated(const CountRequest& request, CountCallback done) {
    done(CountValidated(request));
  }
  // Called by Operate() / OperateAsync() with a request that passed ValidateOperateRequest();
  // the asynchronous one answers inline by default.
  virtual absl::StatusOr<Decision> OperateValidated(const OperateRequest& request);
  virtual void OperateAsyncValidated(const OperateRequest& request, DecisionCallback done) {
    done(OperateValidated(request));
  }
  virtual void ReserveAsyncValidated(const ReserveRequest& request, ReservationCallback done) {
    done(ReserveValidated(request));
  }
  virtual void SettleAsyncValidated(const SettleRequest& request, DecisionCallback done) {
    done(SettleValidated(request));
  }

 private:
  // A valid multi-decision holding reservations or leases, in steps (HoldsInOneStep()).
  void DecideAllHoldingAsync(const MultiRequest& request, MultiCallback done);
};

// The checks Decide() applies; exposed so front ends can reject input early.
absl::Status ValidateRequest(const DecideRequest& request);

// The checks Reserve() and Settle() apply.
absl::Status ValidateReserveRequest(const ReserveRequest& request);
// The checks Take() applies.
absl::Status ValidateTakeRequest(const TakeRequest& request);
absl::Status ValidateSettleRequest(const SettleRequest& request);
absl::Status ValidateAcquireRequest(const AcquireRequest& request);
// The checks Operate() applies.
absl::Status ValidateOperateRequest(const OperateRequest& request);
// The checks Count() applies.
absl::Status ValidateCountRequest(const CountRequest& request);

// Opens a store from its URL (docs/service.md, "Store URLs"). Unknown schemes and bad
// options are errors that name the offending part.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url);

// The URL checks of OpenStore, without opening anything (no connection is made): for
// config files, whose errors should name their line before anything starts.
absl::Status CheckStoreUrl(std::string_view url);

}  // namespace floodgate
