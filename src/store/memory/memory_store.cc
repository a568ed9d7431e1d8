// MemoryStore (memory://): options from the URL, shards, and the Store calls on them.

#include <absl/container/fixed_array.h>
#include <absl/status/status.h>
#include <floodgate/memory_store.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "core/multi.h"
#include "core/state_kind.h"
#include "store/memory/counters.h"
#include "store/memory/shard.h"

namespace floodgate {

namespace {

constexpr std::size_t kMaxShards = 1 << 16;
// The least share of max_bytes a shard is given (fewer shards when max_bytes is small):
// two sliding logs of the largest limit (100,000 runs: 2 MiB), so that one such key never
// has its shard to itself.
constexpr std::size_t kMinShardBytes = std::size_t{4} << 20;
constexpr char kHexDigitChars[] = "0123456789abcdef";

std::size_t DefaultShards() {
  // Several shards per core keeps lock collisions rare; at least 256 keeps each shard's
  // index small, so a rehash pauses one shard for microseconds, not milliseconds.
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(std::bit_ceil(cores * 16), 256, 4096);
}

}  // namespace

absl::StatusOr<MemoryStoreOptions> MemoryStoreOptions::FromUrl(std::string_view url) {
  constexpr std::string_view kScheme = "memory://";
  if (!url.starts_with(kScheme)) {
    return absl::InvalidArgumentError(fmt::format("not a memory:// URL: \"{}\"", url));
  }
  std::string_view rest = url.substr(kScheme.size());
  MemoryStoreOptions options;
  if (rest.empty()) return options;
  if (rest.front() != '?') {
    return absl::InvalidArgumentError(
        fmt::format("memory:// takes no host or path, got \"{}\" (options go after '?')", rest));
  }
  const absl::Status status = ForEachQueryOption(
      rest.substr(1), [&](std::string_view name, std::string_view value) -> absl::Status {
        std::uint64_t n = 0;
        if (name != "max_keys" && name != "max_bytes" && name != "max_reservations" &&
            name != "shards") {
          return absl::InvalidArgumentError(fmt::format(
              "unknown memory:// option \"{}\" (known: max_keys, max_bytes, max_reservations, "
              "shards)",
              name));
        }
        if (!ParseDecimal(value, n) || n == 0) {
          return absl::InvalidArgumentError(fmt::format(
              "memory:// option {} must be a positive integer, got \"{}\"", name, value));
        }
        if (name == "max_keys") {
          options.max_keys = n;
        } else if (name == "max_bytes") {
          options.max_bytes = n;
        } else if (name == "max_reservations") {
          options.max_reservations = n;
        } else if (!std::has_single_bit(n) || n > kMaxShards) {
          return absl::InvalidArgumentError(fmt::format(
              "memory:// option shards must be a power of two up to {}, got {}", kMaxShards, n));
        } else {
          options.shards = n;
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return options;
}

class MemoryStore::Impl {
 public:
  explicit Impl(MemoryStoreOptions options)
      : clock_(std::move(options.clock)),
        counters_(std::max<std::size_t>(1, options.max_keys), options.max_bytes),
        holds_(std::max<std::size_t>(1, options.max_reservations)) {
    std::size_t shards = options.shards == 0 ? DefaultShards() : options.shards;
    // No shard may hold less than one key, and the shards together never more than
    // max_keys: the bound is global even though each shard enforces its own share.
    const std::size_t max_keys = std::max<std::size_t>(1, options.max_keys);
    shards = std::min(shards, std::bit_floor(max_keys));
    max_keys_ = max_keys;
    // Likewise max_bytes, each shard given at least kMinShardBytes where there is room.
    max_bytes_ = std::max<std::size_t>(1, options.max_bytes);
    shards =
        std::min(shards, std::bit_floor(std::max<std::size_t>(1, max_bytes_ / kMinShardBytes)));
    const std::size_t shard_bytes = max_bytes_ / shards;
    shard_bits_ = static_cast<unsigned>(std::countr_zero(shards));
    shards_.reserve(shards);
    // A reservation number's top bits are its shard's index, as a key hash's are.
    const std::uint64_t mask = shard_bits_ == 0 ? 0 : ~std::uint64_t{0} << (64 - shard_bits_);
    for (std::size_t i = 0; i < shards; ++i) {
      const std::uint64_t prefix = shard_bits_ == 0 ? 0 : std::uint64_t{i} << (64 - shard_bits_);
      shards_.push_back(
          std::make_unique<memory::Shard>(max_keys / shards, shard_bytes, holds_, prefix, mask));
    }
  }

  // A reservation's id: its number in 16 lowercase hex digits, and back (0: not such an
  // id). By hand, not fmt / std::from_chars: those were 13% of a reserve + settle, whose
  // cost is a target of its own (docs/reservations.md), and this is all they did. Through
  // tables, writing a byte (two digits) at a time and reading without a branch per digit:
  // 313 -> 225 instructions of a reserve + settle's 2,700 (callgrind).
  static constexpr auto kHexPairs = [] {
    std::array<std::array<char, 2>, 256> pairs{};
    for (int b = 0; b < 256; ++b) pairs[b] = {kHexDigitChars[b >> 4], kHexDigitChars[b & 15]};
    return pairs;
  }();
  static constexpr auto kHexValues = [] {  // -1: not a lowercase hex digit
    std::array<std::int8_t, 256> values{};
    values.fill(-1);
    for (int d = 0; d < 16; ++d) values[static_cast<unsigned char>(kHexDigitChars[d])] = d;
    return values;
  }();
  static std::string ReservationId(std::uint64_t number) {
    std::string id(16, '0');
    for (int i = 7; i >= 0; --i, number >>= 8) {
      std::memcpy(&id[2 * i], kHexPairs[number & 0xff].data(), 2);
    }
    return id;
  }
  static std::uint64_t ReservationNumber(std::string_view id) {
    if (id.size() != 16) return 0;
    std::uint64_t number = 0;
    int invalid = 0;  // negative once any character is not a digit
    for (const char c : id) {
      const int value = kHexValues[static_cast<unsigned char>(c)];
      invalid |= value;
      number = number << 4 | static_cast<std::uint64_t>(value & 15);
    }
    return invalid < 0 ? 0 : number;
  }

  absl::StatusOr<Reservation> Reserve(const ReserveRequest& request) {
    const core::StateKind kind = core::KindOf(request.policy);
    const std::size_t hash = memory::StateHash(memory::KeyHash(request.key), kind);
    const TimePoint now = request.now ? *request.now : Now();
    const TimePoint expires = now + request.hold;
    MakeRoomForHolds(now.time_since_epoch().count());
    Reservation reservation;
    const absl::StatusOr<std::uint64_t> number = ShardFor(hash).Reserve(
        memory::Probe{kind, request.key, hash}, request.policy, now.time_since_epoch().count(),
        request.estimate, expires.time_since_epoch().count(), reservation.decision);
    if (!number.ok()) return number.status();
    if (*number != 0) {
      reservation.id = ReservationId(*number);
      reservation.expires = expires;
      reservation.units = request.estimate;
    }
    return reservation;
  }

  absl::StatusOr<Reservation> Take(const TakeRequest& request) {
    const core::StateKind kind = core::KindOf(request.policy);
    const std::size_t hash = memory::StateHash(memory::KeyHash(request.key), kind);
    const std::int64_t now = (request.now ? *request.now : Now()).time_since_epoch().count();
    MakeRoomForHolds(now);
    Reservation reservation;
    core::LeaseGrant lease;
    const absl::StatusOr<std::uint64_t> number =
        ShardFor(hash).Take(memory::Probe{kind, request.key, hash}, request.policy, now,
                            request.up_to, request.lifetime.count(), reservation.decision, lease);
    if (!number.ok()) return number.status();
    if (*number != 0) {
      reservation.id = ReservationId(*number);
      reservation.expires = TimePoint(std::chrono::microseconds(lease.ends));
      reservation.units = lease.units;
    }
    return reservation;
  }

  absl::StatusOr<Decision> Settle(const SettleRequest& request) {
    // An id this store did not make is as unknown as one it forgot.
    const std::uint64_t number = ReservationNumber(request.id);
    if (number == 0) return absl::NotFoundError("unknown reservation: not an id this store made");
    const TimePoint now = request.now ? *request.now : Now();
    absl::StatusOr<Decision> decision(absl::in_place);
    absl::Status status =
        ShardFor(number).Settle(number, now.time_since_epoch().count(), request.actual, *decision);
    if (!status.ok()) return status;
    return decision;
  }

  Decision Operate(const OperateRequest& request) {
    const core::StateKind kind = core::KindOf(request.policy);
    const std::size_t hash = memory::StateHash(memory::KeyHash(request.key), kind);
    const TimePoint now = request.now ? *request.now : Now();
    Decision decision;
    ShardFor(hash).Operate(memory::Probe{kind, request.key, hash}, request.policy,
                           now.time_since_epoch().count(), request.operation, request.units,
                           decision);
    return decision;
  }

  void Decide(std::string_view key, const Policy& policy, std::int64_t cost,
              const std::optional<TimePoint>& at, Decision& decision) {
    const core::StateKind kind = core::KindOf(policy);
    const std::size_t hash = memory::StateHash(memory::KeyHash(key), kind);
    const TimePoint now = at ? *at : Now();
    ShardFor(hash).Decide(memory::Probe{kind, key, hash}, policy, now.time_since_epoch().count(),
                          cost, decision);
  }

  // docs/multi.md: every item evaluated, then all committed or none, with every involved
  // shard's lock held throughout, taken in shard order (so two multi-decisions never
  // wait on each other in a cycle). An item that holds (a concurrency item's lease, an
  // item's reservation) is held in the same step (docs/leases.md, "In a multi-decision").
  absl::Status DecideAll(const MultiRequest& request, MultiDecision& out) {
    const std::size_t n = request.items.size();
    if (n == 1 && HoldOf(request.items[0]).count() == 0) {
      // A multi-decision of one item is that item's single decision (docs/multi.md), made
      // without the plan-then-commit steps, which cost half as much again as the decision.
      const CheckItem& item = request.items[0];
      out.items.resize(1);
      Decide(item.key, item.policy, item.cost, request.now, out.items[0]);
      out.allowed = core::MultiAllows(request.items, out.items);
      core::Summarize(request.items, out);
      return absl::OkStatus();
    }
    // n slots on the stack, constructed only for the items there are: a std::array of
    // kMaxItems would construct (and zero) all 16 on every call, measured as a fifth of a
    // small multi-decision.
    struct Work {
      Work() {}  // member by member: FixedArray's value-initialisation would zero it first
      memory::Probe probe;
      memory::Shard* shard;
      memory::Shard::Plan plan;
      std::int64_t hold_us;  // HoldOf(item): > 0 for a reservation or a lease
      core::ReservationMark mark;
    };
    absl::FixedArray<Work, kMaxItems> work(n);
    absl::FixedArray<memory::Shard*, kMaxItems> order(n);
    bool holds = false;
    std::size_t key_hash = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const CheckItem& item = request.items[i];
      // A client's limits usually share its key (one per algorithm): hashed once.
      key_hash =
          i > 0 && item.key == request.items[i - 1].key ? key_hash : memory::KeyHash(item.key);
      const core::StateKind kind = core::KindOf(item.policy);
      const std::size_t hash = memory::StateHash(key_hash, kind);
      work[i].probe = memory::Probe{kind, item.key, hash};
      work[i].shard = order[i] = &ShardFor(hash);
      work[i].hold_us = HoldOf(item).count();
      holds = holds || work[i].hold_us > 0;
    }
    // Shards live in one vector, so their addresses order them as their indexes do. An
    // insertion sort: a few items at most, where std::sort's setup costs more than it.
    for (std::size_t i = 1; i < n; ++i) {
      for (std::size_t j = i; j > 0 && order[j] < order[j - 1]; --j)
        std::swap(order[j], order[j - 1]);
    }
    const auto locked = std::span(order.begin(), std::unique(order.begin(), order.end()));
    const std::int64_t now = (request.now ? *request.now : Now()).time_since_epoch().count();
    if (holds) MakeRoomForHolds(now);  // before any lock: it takes every shard's in turn
    for (memory::Shard* shard : locked) shard->mutex().lock();
    for (const Work& w : work) w.shard->Prefetch(w.probe);

    // Claims for every hold the request may make, returned for those it does not make.
    std::size_t claims = 0;
    const auto refuse = [&](absl::Status status) {
      for (; claims > 0; --claims) holds_.Return();
      for (memory::Shard* shard : locked) shard->mutex().unlock();
      return status;
    };
    if (holds) {
      for (const Work& w : work) {
        if (w.hold_us == 0) continue;
        if (absl::Status room = w.shard->ClaimHold(now); !room.ok()) return refuse(room);
        ++claims;
      }
    }
    out.items.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      Work& w = work[i];
      w.plan = w.shard->Evaluate(w.probe, request.items[i].policy, now, request.items[i].cost,
                                 out.items[i]);
      if (w.hold_us > 0 && out.items[i].allowed) {
        w.mark = w.shard->MarkOf(w.probe.kind, request.items[i].policy, w.plan, now,
                                 request.items[i].cost);
      }
    }
    if (core::Waits(request.items)) {
      // delay= (core/multi.h): the items decided again at the common start, or by the
      // allowance that denies them.
      const core::MultiStart start = core::StartOf(request.items, out.items);
      for (std::size_t i = 0; i < n; ++i) {
        const CheckItem& item = request.items[i];
        if (auto window = core::Redecide(item, out.items[i], start, now)) {
          work[i].plan = work[i].shard->EvaluateInWindow(work[i].probe, work[i].plan, item.policy,
                                                         now, item.cost, *window, out.items[i]);
        }
      }
      out.allowed = start.Admits();
    } else {
      out.allowed = core::MultiAllows(request.items, out.items);
    }
    if (holds && out.allowed) {
      // Nothing written yet. Several items of one key may take it past kMaxHoldsPerKey by
      // as many: still a bound.
      for (std::size_t i = 0; i < n; ++i) {
        if (work[i].hold_us == 0 || !out.items[i].allowed) continue;  // holds nothing
        absl::Status room = work[i].shard->KeyHasRoom(work[i].probe, now);
        if (!room.ok()) return refuse(room);
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (!out.items[i].allowed) {  // a denial: written as it is, with the block it starts
        work[i].shard->SaveBlock(work[i].probe, work[i].plan, now);
        continue;
      }
      Work& w = work[i];
      if (out.allowed) {
        w.shard->Commit(w.probe, w.plan, now);
        if (w.hold_us > 0) {
          const std::int64_t expires = now + w.hold_us;
          const std::uint64_t number =
              w.shard->Hold(w.probe, request.items[i].policy, w.mark, expires);
          out.held.push_back(HeldReservation{i, ReservationId(number),
                                             TimePoint(std::chrono::microseconds(expires))});
          --claims;
        }
      } else {
        // Nothing is consumed: the item reports where it stands, as a peek.
        w.shard->Peek(w.probe, w.plan, request.items[i].policy, now, out.items[i]);
      }
    }
    for (; claims > 0; --claims) holds_.Return();
    for (memory::Shard* shard : locked) shard->mutex().unlock();
    core::Summarize(request.items, out);
    return absl::OkStatus();
  }

  CountAnswer Count(const CountRequest& request) {
    return counters_.Count(request,
                           (request.now ? *request.now : Now()).time_since_epoch().count());
  }

  StoreStats Stats() const {
    StoreStats total;
    total.keys = counters_.size();
    total.evictions = counters_.evictions();
    for (const auto& shard : shards_) {
      const StoreStats s = shard->Stats();
      total.keys += s.keys;
      total.evictions += s.evictions;
      total.expired += s.expired;
      total.reservations += s.reservations;
    }
    return total;
  }

  std::size_t ReclaimExpired(std::size_t budget) {
    const std::int64_t now = Now().time_since_epoch().count();
    std::size_t reclaimed = 0;
    for (auto& shard : shards_) reclaimed += shard->ReclaimExpired(now, budget);
    return reclaimed;
  }

  std::string Describe() const {
    return fmt::format("memory://?max_keys={}&max_bytes={}&max_reservations={}&shards={}",
                       max_keys_, max_bytes_, holds_.max(), shards_.size());
  }
  std::size_t shard_count() const { return shards_.size(); }
  std::size_t Bytes() const {
    std::size_t bytes = counters_.bytes();  // upstream's counters: max_bytes covers them too
    for (const auto& shard : shards_) bytes += shard->Bytes();
    return bytes;
  }

 private:
  TimePoint Now() const { return clock_ ? clock_() : SystemNow(); }
  // A store holding max_reservations asks every shard, one lock at a time, to drop the
  // holds that ended before a shard refuses one (its own it drops itself): the expired
  // holds may all sit in other shards. O(shards) while the store stays full of live ones.
  void MakeRoomForHolds(std::int64_t now_us) {
    if (!holds_.full()) return;
    for (auto& shard : shards_) shard->ReclaimExpiredHolds(now_us);
  }
  memory::Shard& ShardFor(std::size_t hash) {
    // The top bits pick the shard; SwissTable uses the low bits inside it.
    return shard_bits_ == 0 ? *shards_[0] : *shards_[hash >> (64 - shard_bits_)];
  }

  std::function<TimePoint()> clock_;
  mutable memory::Counters counters_;  // upstream's counters (Store::Count)
  std::size_t max_keys_ = 0;
  std::size_t max_bytes_ = 0;
  unsigned shard_bits_ = 0;
  memory::HoldBudget holds_;  // before the shards, which hold a reference to it
  std::vector<std::unique_ptr<memory::Shard>> shards_;
};

MemoryStore::MemoryStore(MemoryStoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
MemoryStore::~MemoryStore() = default;

absl::StatusOr<Decision> MemoryStore::DecideValidated(const DecideRequest& request) {
  // DecidePreparedValidated's body, not a call to it: the call measured 15 instructions of
  // a ~630-instruction decision (callgrind), on every Check(key, policy).
  absl::StatusOr<Decision> result(absl::in_place);
  impl_->Decide(request.key, request.policy, request.cost, request.now, *result);
  return result;
}
absl::StatusOr<Decision> MemoryStore::DecidePreparedValidated(std::string_view key,
                                                              const Policy& policy,
                                                              std::int64_t cost,
                                                              std::optional<TimePoint> now) {
  // Decided in place, in the copy the caller gets (see memory::Shard::Decide).
  absl::StatusOr<Decision> result(absl::in_place);
  impl_->Decide(key, policy, cost, now, *result);
  return result;
}
absl::StatusOr<MultiDecision> MemoryStore::DecideAllValidated(const MultiRequest& request) {
  absl::StatusOr<MultiDecision> result(absl::in_place);
  if (absl::Status status = impl_->DecideAll(request, *result); !status.ok()) return status;
  return result;
}
absl::StatusOr<Reservation> MemoryStore::ReserveValidated(const ReserveRequest& request) {
  return impl_->Reserve(request);
}
absl::StatusOr<Reservation> MemoryStore::TakeValidated(const TakeRequest& request) {
  return impl_->Take(request);
}
absl::StatusOr<Decision> MemoryStore::SettleValidated(const SettleRequest& request) {
  return impl_->Settle(request);
}
absl::StatusOr<Decision> MemoryStore::OperateValidated(const OperateRequest& request) {
  return impl_->Operate(request);
}
absl::StatusOr<CountAnswer> MemoryStore::CountValidated(const CountRequest& request) {
  return impl_->Count(request);
}
StoreStats MemoryStore::Stats() const { return impl_->Stats(); }
std::string MemoryStore::Describe() const { return impl_->Describe(); }
std::size_t MemoryStore::ReclaimExpired(std::size_t budget_per_shard) {
  return impl_->ReclaimExpired(budget_per_shard);
}
std::size_t MemoryStore::shard_count() const { return impl_->shard_count(); }
std::size_t MemoryStore::bytes() const { return impl_->Bytes(); }

}  // namespace floodgate
