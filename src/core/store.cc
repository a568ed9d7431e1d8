// What every Store shares: request validation and the calls built on a store's own ones.

#include <absl/status/status.h>
#include <absl/strings/escaping.h>
#include <floodgate/store.h>
#include <fmt/format.h>

#include <algorithm>
#include <future>

#include "common/strings.h"
#include "core/multi.h"
#include "core/state_kind.h"

namespace floodgate {

namespace {

// ValidateTime and ValidateDecision are inlined where they are called: every decision
// passes through them, and called out of line their calls and the Status each returns
// through memory were ~30 instructions of an in-memory decision's ~700 (callgrind).
[[gnu::always_inline]] inline absl::Status ValidateTime(const std::optional<TimePoint>& now) {
  if (now && now->time_since_epoch().count() < 0) {
    return absl::InvalidArgumentError("now must not be before the Unix epoch");
  }
  if (now && *now >= kLatestTime) {
    return absl::InvalidArgumentError("now must be before 2200-01-01");
  }
  return absl::OkStatus();
}

absl::Status ValidateHold(std::chrono::microseconds hold) {
  if (hold >= kMinHold && hold <= kMaxHold) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("hold must be between {} µs and {} µs, got {} µs",
                                                kMinHold.count(), kMaxHold.count(), hold.count()));
}

// A decision's checks but the policy's own (Policy::Validate).
[[gnu::always_inline]] inline absl::Status ValidateKeyCostTime(
    std::string_view key, std::int64_t cost, const std::optional<TimePoint>& now) {
  if (key.empty()) return absl::InvalidArgumentError("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("key is {} bytes; the limit is {}", key.size(), kMaxKeyBytes));
  }
  if (cost < 0 || cost > kMaxCost) {
    return absl::InvalidArgumentError(
        fmt::format("cost must be between 0 and 1000000000, got {}", cost));
  }
  return ValidateTime(now);
}

// ValidateRequest without the rule that a concurrency limit is only peeked: a reserve
// (an Acquire) is how it is taken.
[[gnu::always_inline]] inline absl::Status ValidateDecision(const DecideRequest& request) {
  if (absl::Status status = ValidateKeyCostTime(request.key, request.cost, request.now);
      !status.ok()) {
    return status;
  }
  return request.policy.Validate();
}

// The rule that a check only peeks at a concurrency limit (cost 0).
[[gnu::always_inline]] inline absl::Status ValidatePeekOnly(const Policy& policy,
                                                            std::int64_t cost) {
  if (policy.algorithm == Algorithm::kConcurrency && cost > 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{} is held with Acquire and freed with Release (POST /v1/acquire, /v1/release); a "
        "check may only peek at it (cost 0)",
        policy.ToString()));
  }
  return absl::OkStatus();
}

// ValidateRequest, inlined into Store::Decide and DecideAsync as the validators it calls
// are (above).
[[gnu::always_inline]] inline absl::Status ValidateDecideRequest(const DecideRequest& request) {
  if (absl::Status status = ValidatePeekOnly(request.policy, request.cost); !status.ok()) {
    return status;
  }
  return ValidateDecision(request);
}

}  // namespace

absl::Status ValidateRequest(const DecideRequest& request) {
  return ValidateDecideRequest(request);
}

absl::Status ValidateMultiRequest(const MultiRequest& request) {
  const std::size_t n = request.items.size();
  if (n == 0 || n > kMaxItems) {
    return absl::InvalidArgumentError(
        fmt::format("a multi-decision takes 1 to {} items, got {}", kMaxItems, n));
  }
  // One time for every item: checked once.
  if (absl::Status status = ValidateTime(request.now); !status.ok()) return status;
  for (std::size_t i = 0; i < n; ++i) {
    const CheckItem& item = request.items[i];
    const DecideRequest single{item.key, item.policy, item.cost, std::nullopt};
    absl::Status status;
    if (item.policy.algorithm == Algorithm::kConcurrency) {
      if (item.cost > 1) {
        status = absl::InvalidArgumentError(
            fmt::format("{} takes one lease per item: cost 1 acquires it, 0 peeks; got {}",
                        item.policy.ToString(), item.cost));
      } else if (item.hold.count() != 0) {
        status = absl::InvalidArgumentError(fmt::format(
            "{} holds its lease for the lease time: give it no hold", item.policy.ToString()));
      } else {
        status = ValidateDecision(single);  // cost 1: the item acquires a lease
      }
    } else if (item.hold.count() != 0 && item.cost > 0) {
      status = ValidateReserveRequest(
          ReserveRequest{item.key, item.policy, item.cost, item.hold, std::nullopt});
    } else {
      status = item.hold.count() != 0 ? ValidateHold(item.hold) : absl::OkStatus();
      if (status.ok()) status = ValidateDecision(single);
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(fmt::format("items[{}]: {}", i, MessageOf(status)));
    }
    const core::StateKind kind = core::KindOf(item.policy);
    for (std::size_t j = 0; j < i; ++j) {
      // The algorithm first: a client's limits usually share its key under different ones.
      const CheckItem& other = request.items[j];
      if (core::KindOf(other.policy) == kind && other.key == item.key) {
        return absl::InvalidArgumentError(fmt::format(
            "items[{}] and items[{}] share key \"{}\" under {}: they would share state; give each "
            "limit its own key",
            j, i, ToStd(absl::CEscape(ToAbsl(item.key))), AlgorithmName(item.policy.algorithm)));
      }
    }
  }
  if (core::Waits(request.items)) {
    for (std::size_t i = 0; i < n; ++i) {
      // A held item's lease or reservation is made in a step of its own on Redis
      // (core/holding_multi.cc), before the common start of delay= is known.
      if (HoldOf(request.items[i]).count() > 0) {
        return absl::InvalidArgumentError(fmt::format(
            "items[{}]: {} holds a lease or a reservation, which a multi-decision under delay= "
            "does not take yet; decide it on its own",
            i, request.items[i].policy.ToString()));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

bool Holds(const MultiRequest& request) {
  return std::any_of(request.items.begin(), request.items.end(),
                     [](const CheckItem& item) { return HoldOf(item).count() > 0; });
}

}  // namespace

absl::StatusOr<MultiDecision> Store::DecideAll(const MultiRequest& request) {
  if (absl::Status status = ValidateMultiRequest(request); !status.ok()) return status;
  if (!HoldsInOneStep() && Holds(request)) {
    std::promise<absl::StatusOr<MultiDecision>> answer;
    DecideAllHoldingAsync(request, [&answer](absl::StatusOr<MultiDecision> decided) {
      answer.set_value(std::move(decided));
    });
    return answer.get_future().get();
  }
  return DecideAllValidated(request);
}

void Store::DecideAllAsync(const MultiRequest& request, MultiCallback done) {
  if (absl::Status status = ValidateMultiRequest(request); !status.ok()) {
    done(std::move(status));
    return;
  }
  if (!HoldsInOneStep() && Holds(request)) {
    return DecideAllHoldingAsync(request, std::move(done));
  }
  DecideAllAsyncValidated(request, std::move(done));
}

absl::StatusOr<Decision> Store::Decide(const DecideRequest& request) {
  if (absl::Status status = ValidateDecideRequest(request); !status.ok()) return status;
  return DecideValidated(request);
}

absl::StatusOr<Decision> Store::Decide(std::string_view key, const PreparedPolicy& prepared,
                                       std::int64_t cost, std::optional<TimePoint> now) {
  // The checks of ValidateRequest in its order, but Policy::Validate, which Prepare ran.
  const Policy& policy = prepared.policy();
  if (absl::Status status = ValidatePeekOnly(policy, cost); !status.ok()) return status;
  if (absl::Status status = ValidateKeyCostTime(key, cost, now); !status.ok()) return status;
  return DecidePreparedValidated(key, policy, cost, now);
}

absl::StatusOr<Decision> Store::DecidePreparedValidated(std::string_view key, const Policy& policy,
                                                        std::int64_t cost,
                                                        std::optional<TimePoint> now) {
  return DecideValidated(DecideRequest{key, policy, cost, now});
}

void Store::DecideAsync(const DecideRequest& request, DecisionCallback done) {
  if (absl::Status status = ValidateDecideRequest(request); !status.ok()) {
    done(std::move(status));
    return;
  }
  DecideAsyncValidated(request, std::move(done));
}

absl::Status ValidateReserveRequest(const ReserveRequest& request) {
  if (request.estimate < 1 || request.estimate > kMaxCost) {
    return absl::InvalidArgumentError(
        fmt::format("estimate must be between 1 and {} (a reservation of 0 holds nothing), got {}",
                    kMaxCost, request.estimate));
  }
  if (absl::Status status = ValidateHold(request.hold); !status.ok()) return status;
  if (request.policy.algorithm == Algorithm::kConcurrency &&
      (request.estimate != 1 || request.hold != request.policy.period)) {
    return absl::InvalidArgumentError(fmt::format(
        "{} is held one lease at a time for its lease time: use Acquire (POST /v1/acquire)",
        request.policy.ToString()));
  }
  if (request.policy.delay.count() > 0) {
    // A settle refunds or charges against the reservation's mark at its time; a delayed
    // admission's charge lies ahead of it, which settle does not model yet.
    return absl::InvalidArgumentError(
        fmt::format("{}: reservations are not for delay= yet; decide with a cost instead",
                    request.policy.ToString()));
  }
  if (request.policy.calendar != Calendar::kNone) {
    // A reservation's settle finds its window again later, by ordinal and bounds the
    // Redis scripts would need from the caller at settle time: not built yet.
    return absl::InvalidArgumentError(fmt::format(
        "{}: reservations are not for calendar windows (tz=) yet; decide with a cost instead",
        request.policy.ToString()));
  }
  return ValidateDecision(
      DecideRequest{request.key, request.policy, request.estimate, request.now});
}

absl::Status ValidateTakeRequest(const TakeRequest& request) {
  if (request.up_to < 1 || request.up_to > kMaxCost) {
    return absl::InvalidArgumentError(fmt::format(
        "a take leases between 1 and {} units, got {}", kMaxCost, request.up_to));
  }
  if (request.policy.algorithm == Algorithm::kConcurrency) {
    return absl::InvalidArgumentError(fmt::format(
        "{} cannot be prefetched: a concurrency lease is held by one request, use Acquire",
        request.policy.ToString()));
  }
  if (request.policy.delay.count() > 0) {
    return absl::InvalidArgumentError(
        fmt::format("{} cannot be prefetched: delay= schedules each request on the shared key",
                    request.policy.ToString()));
  }
  if (request.policy.calendar != Calendar::kNone) {
    // A lease ends with the window holding now (docs/algorithms.md, "Take up to k"): with
    // tz that end is the zone's midnight, which lua/take.lua is not given yet.
    return absl::InvalidArgumentError(fmt::format(
        "{} cannot be prefetched: take is not for calendar windows (tz=) yet",
        request.policy.ToString()));
  }
  if (absl::Status status = ValidateHold(request.lifetime); !status.ok()) return status;
  return ValidateDecision(DecideRequest{request.key, request.policy, request.up_to, request.now});
}

absl::Status ValidateAcquireRequest(const AcquireRequest& request) {
  if (request.policy.algorithm != Algorithm::kConcurrency) {
    return absl::InvalidArgumentError(
        fmt::format("a lease is acquired under a concurrency policy (concurrency:N[,lease=30s]), "
                    "not {}",
                    request.policy.ToString()));
  }
  return ValidateReserveRequest(LeaseReservation(request));
}

absl::Status ValidateSettleRequest(const SettleRequest& request) {
  if (request.id.empty() || request.id.size() > kMaxReservationIdBytes) {
    return absl::InvalidArgumentError(fmt::format("reservation id must be 1 to {} bytes, got {}",
                                                  kMaxReservationIdBytes, request.id.size()));
  }
  if (request.actual < 0 || request.actual > kMaxCost) {
    return absl::InvalidArgumentError(
        fmt::format("actual must be between 0 and {}, got {}", kMaxCost, request.actual));
  }
  return ValidateTime(request.now);
}

absl::StatusOr<Reservation> Store::Reserve(const ReserveRequest& request) {
  if (absl::Status status = ValidateReserveRequest(request); !status.ok()) return status;
  return ReserveValidated(request);
}

absl::StatusOr<Decision> Store::Settle(const SettleRequest& request) {
  if (absl::Status status = ValidateSettleRequest(request); !status.ok()) return status;
  return SettleValidated(request);
}

void Store::ReserveAsync(const ReserveRequest& request, ReservationCallback done) {
  if (absl::Status status = ValidateReserveRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  ReserveAsyncValidated(request, std::move(done));
}

void Store::SettleAsync(const SettleRequest& request, DecisionCallback done) {
  if (absl::Status status = ValidateSettleRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  SettleAsyncValidated(request, std::move(done));
}

absl::StatusOr<Reservation> Store::Take(const TakeRequest& request) {
  if (absl::Status status = ValidateTakeRequest(request); !status.ok()) return status;
  return TakeValidated(request);
}

void Store::TakeAsync(const TakeRequest& request, ReservationCallback done) {
  if (absl::Status status = ValidateTakeRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  TakeAsyncValidated(request, std::move(done));
}

absl::StatusOr<Lease> Store::Acquire(const AcquireRequest& request) {
  if (absl::Status status = ValidateAcquireRequest(request); !status.ok()) return status;
  return ReserveValidated(LeaseReservation(request));
}

absl::StatusOr<Decision> Store::Release(const ReleaseRequest& request) {
  return Settle(SettleRequest{request.id, 0, request.now});
}

void Store::AcquireAsync(const AcquireRequest& request, ReservationCallback done) {
  if (absl::Status status = ValidateAcquireRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  ReserveAsyncValidated(LeaseReservation(request), std::move(done));
}

void Store::ReleaseAsync(const ReleaseRequest& request, DecisionCallback done) {
  SettleAsync(SettleRequest{request.id, 0, request.now}, std::move(done));
}

absl::StatusOr<Reservation> Store::ReserveValidated(const ReserveRequest&) {
  return absl::UnimplementedError(
      fmt::format("{} does not hold reservations yet (memory:// does)", Describe()));
}

absl::StatusOr<Reservation> Store::TakeValidated(const TakeRequest&) {
  return absl::UnimplementedError(fmt::format("{} does not take prefetch leases", Describe()));
}

absl::StatusOr<Decision> Store::SettleValidated(const SettleRequest&) {
  return absl::UnimplementedError(
      fmt::format("{} does not hold reservations yet (memory:// does)", Describe()));
}

absl::StatusOr<CountAnswer> Store::CountValidated(const CountRequest&) {
  return absl::UnimplementedError(
      fmt::format("{} keeps no envoyproxy/ratelimit counters", Describe()));
}

absl::Status ValidateCountRequest(const CountRequest& request) {
  if (request.key.empty() || request.key.size() > kMaxCounterKeyBytes) {
    return absl::InvalidArgumentError(fmt::format("a counter's key is 1 to {} bytes, got {}",
                                                  kMaxCounterKeyBytes, request.key.size()));
  }
  if (request.hits < 0 || request.hits > kMaxCost) {
    return absl::InvalidArgumentError(
        fmt::format("hits must be between 0 and {}, got {}", kMaxCost, request.hits));
  }
  if (request.ttl.count() < 0 || request.ttl > kMaxCounterTtl) {
    return absl::InvalidArgumentError(fmt::format("a counter's ttl is 0 to {} s, got {} s",
                                                  kMaxCounterTtl.count(), request.ttl.count()));
  }
  return ValidateTime(request.now);
}

absl::StatusOr<CountAnswer> Store::Count(const CountRequest& request) {
  if (absl::Status status = ValidateCountRequest(request); !status.ok()) return status;
  return CountValidated(request);
}

void Store::CountAsync(const CountRequest& request, CountCallback done) {
  if (absl::Status status = ValidateCountRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  CountAsyncValidated(request, std::move(done));
}

std::string_view KeyOperationName(KeyOperation op) {
  switch (op) {
    case KeyOperation::kReset:
      return "reset";
    case KeyOperation::kRefund:
      return "refund";
    case KeyOperation::kPenalize:
      return "penalize";
  }
  return "?";
}

absl::Status ValidateOperateRequest(const OperateRequest& request) {
  if (request.policy.algorithm == Algorithm::kConcurrency) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: a lease is given back by Release with its id (POST /v1/release); a concurrency "
        "key is not reset, refunded or penalized",
        request.policy.ToString()));
  }
  const bool counted = request.operation != KeyOperation::kReset;
  if (counted && (request.units < 1 || request.units > kMaxCost)) {
    return absl::InvalidArgumentError(
        fmt::format("units must be between 1 and {}, got {}", kMaxCost, request.units));
  }
  if (!counted && request.units != 0) {
    return absl::InvalidArgumentError("a reset takes no units");
  }
  return ValidateDecision(DecideRequest{request.key, request.policy, 0, request.now});
}

absl::StatusOr<Decision> Store::Operate(const OperateRequest& request) {
  if (absl::Status status = ValidateOperateRequest(request); !status.ok()) return status;
  return OperateValidated(request);
}

void Store::OperateAsync(const OperateRequest& request, DecisionCallback done) {
  if (absl::Status status = ValidateOperateRequest(request); !status.ok()) {
    return done(std::move(status));
  }
  OperateAsyncValidated(request, std::move(done));
}

absl::StatusOr<Decision> Store::OperateValidated(const OperateRequest&) {
  return absl::UnimplementedError(fmt::format("{} does not operate on keys", Describe()));
}

}  // namespace floodgate
