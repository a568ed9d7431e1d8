// The budget table: leases taken (one in flight per key), spent in process, returned, resized.

#include "store/prefetch/budgets.h"

#include <absl/hash/hash.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace floodgate::prefetch {

// Types of the table's members: named, not anonymous (the library compiles in unity batches).
namespace table {

// A budget's (key, policy), viewing the budget's own copies; `hash` computed once.
struct KeyRef {
  std::string_view key;
  const Policy* policy;
  std::size_t hash;
};
struct KeyRefHash {
  std::size_t operator()(const KeyRef& ref) const { return ref.hash; }
};
struct KeyRefEq {
  bool operator()(const KeyRef& a, const KeyRef& b) const {
    return a.hash == b.hash && a.key == b.key && *a.policy == *b.policy;
  }
};

enum class Phase : std::uint8_t {
  kIdle,        // no lease: the next request takes one
  kTaking,      // a take in flight; requests wait for it in `waiters`
  kHolding,     // a lease: units to spend until `spend_until`
  kDenied,      // the last take found nothing left: its denial stands until `denied_until`
  kPerRequest,  // no lease can be taken under this policy and ttl: decided per request
};

}  // namespace table

using table::KeyRef;
using table::KeyRefEq;
using table::KeyRefHash;
using table::Phase;

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

std::size_t HashOf(std::string_view key, const Policy& p) {
  return absl::HashOf(key, static_cast<int>(p.algorithm), p.limit, p.period.count(), p.burst,
                      static_cast<int>(p.refill), static_cast<int>(p.prefetch), p.prefetch_units,
                      p.prefetch_ttl.count());
}

microseconds Elapsed(Steady::time_point from, Steady::time_point to) {
  return std::max(microseconds(0), duration_cast<microseconds>(to - from));
}

// For the window algorithms, the time from the take to its window's end on the store's own
// clock, from the take's reset_after ((w+1)P - now for fixed_window, (w+2)P - now for
// sliding_window: docs/algorithms.md); nothing for the others.
std::optional<microseconds> ToWindowEnd(const Policy& policy, const Reservation& taken) {
  const microseconds reset_after = taken.decision.reset_after;
  if (policy.algorithm == Algorithm::kFixedWindow && reset_after.count() > 0) {
    return reset_after;
  }
  if (policy.algorithm == Algorithm::kSlidingWindow && reset_after > policy.period) {
    return reset_after - policy.period;
  }
  return std::nullopt;
}

// How long a lease may be spent from, counted from when its take was sent (before the
// store's `now`, so never later than the store's own end): the ttl; the reservation's
// `expires` (a window's end, on this host's clock); and the window's end on the store's
// own clock (ToWindowEnd), so that no clock skew stretches a lease past its window. The
// last tenth is kept back so the return of unused units reaches the store while the lease
// still holds.
microseconds SpendSpan(const Policy& policy, Moment sent, const Reservation& taken) {
  microseconds span = policy.prefetch_ttl;
  if (taken.expires.time_since_epoch().count() > 0) {
    span = std::min(span, duration_cast<microseconds>(taken.expires - sent.system));
  }
  if (const auto to_end = ToWindowEnd(policy, taken)) span = std::min(span, *to_end);
  return std::max(microseconds(0), span - span / 10);
}

// Whether the window's end, not the ttl, ends this lease.
bool EndsWithItsWindow(const Policy& policy, const Reservation& taken) {
  const auto to_end = ToWindowEnd(policy, taken);
  return to_end && *to_end < policy.prefetch_ttl;
}

}  // namespace

struct Budgets::Return {
  std::string id;
  std::int64_t used = 0;
  std::int64_t unused = 0;
};

struct Budgets::Shard {
  std::mutex mu;
  absl::flat_hash_map<KeyRef, std::shared_ptr<Budget>, KeyRefHash, KeyRefEq> budgets;
  HotKeys hot{256};
};

// One (key, policy)'s budget; guarded by its shard's mutex.
struct Budgets::Budget {
  Budget(std::string_view key_in, const Policy& policy_in, std::size_t hash_in, Shard& shard_in)
      : key(key_in), policy(policy_in), hash(hash_in), shard(shard_in) {}
  KeyRef Ref() const { return KeyRef{key, &policy, hash}; }

  struct Waiter {
    std::int64_t cost = 0;
    DecisionCallback done;
  };

  const std::string key;
  const Policy policy;  // as requests give it, prefetch included
  const std::size_t hash;
  Shard& shard;
  Phase phase = Phase::kIdle;
  std::int64_t size = 0;  // units the next take asks for
  Steady::time_point last_used;
  // kHolding: the lease.
  std::string id;
  std::int64_t units = 0;  // leased
  std::int64_t left = 0;   // not yet spent
  Steady::time_point taken_at;
  Steady::time_point spend_until;
  // Whether unused units go back when the lease ends: not when a window's end ends it
  // (docs/prefetch_client.md, "Returns"); such units are spent.
  bool returns_unused = true;
  Decision shared;  // the take's answer: limit, remaining after it, reset_after
  // kDenied.
  Decision denial;
  Steady::time_point denied_at;
  Steady::time_point denied_until;
  // kTaking.
  std::vector<Waiter> waiters;

  // A request admitted from the lease at `now` (docs/prefetch_client.md, "Decisions").
  Decision Local(Steady::time_point now) const {
    Decision d;
    d.allowed = true;
    d.limit = shared.limit;
    d.remaining = left + std::max<std::int64_t>(0, shared.remaining);
    d.reset_after = std::max(microseconds(0), shared.reset_after - Elapsed(taken_at, now));
    return d;
  }

  Decision RememberedDenial(Steady::time_point now) const {
    Decision d = denial;
    const microseconds elapsed = Elapsed(denied_at, now);
    if (d.retry_after.count() > 0) {
      d.retry_after = std::max(microseconds(1), d.retry_after - elapsed);
    }
    d.reset_after = std::max(microseconds(0), d.reset_after - elapsed);
    return d;
  }

  // Idle entries are dropped after this long unused (their sizing is forgotten).
  microseconds IdleAfter() const {
    return std::max<microseconds>(std::chrono::seconds(1), 10 * policy.prefetch_ttl);
  }
};

enum class Budgets::Route : std::uint8_t {
  kAnswered,    // answer holds the decision (from the lease, or a remembered denial)
  kWaiting,     // queued behind the take in flight
  kTake,        // queued, and this request sends the take
  kPerRequest,  // the shared state decides it
};

struct Budgets::Admission {
  Route route = Route::kPerRequest;
  Decision answer;
  std::shared_ptr<Budget> take;  // kTake: the budget whose take to send
  std::int64_t take_units = 0;
  bool created = false;
  std::vector<Return> returns;  // leases ended on the way, to return
};

Budgets::Budgets(std::unique_ptr<Backend> backend, BudgetOptions options)
    : backend_(std::move(backend)), options_(options) {
  for (auto& shard : shards_) shard = std::make_unique<Shard>();
}

Budgets::~Budgets() { Close(); }

void Budgets::Decide(const DecideRequest& request, DecisionCallback done, Moment now) {
  // A peek spends nothing; a caller's own time is not the store's (leases end on it).
  if (request.cost == 0 || request.now.has_value() || closed_.load(std::memory_order_relaxed)) {
    return PerRequest(request, std::move(done));
  }
  const std::size_t hash = HashOf(request.key, request.policy);
  Admission admission;
  Admit(*shards_[hash % kShards], hash, request, now, done, admission);
  if (!admission.returns.empty()) SendReturns(admission.returns);
  if (admission.created) StartSweeper();
  switch (admission.route) {
    case Route::kAnswered:
      local_decisions_.fetch_add(1, std::memory_order_relaxed);
      return done(admission.answer);
    case Route::kWaiting:
      return;
    case Route::kTake:
      return StartTake(admission.take, admission.take_units, now);
    case Route::kPerRequest:
      return PerRequest(request, std::move(done));
  }
}

void Budgets::Admit(Shard& shard, std::size_t hash, const DecideRequest& request, Moment now,
                    DecisionCallback& done, Admission& out) {
  std::lock_guard lock(shard.mu);
  auto it = shard.budgets.find(KeyRef{request.key, &request.policy, hash});
  if (it == shard.budgets.end()) {
    if (request.policy.prefetch == Prefetch::kAuto &&
        !shard.hot.Hit(hash, now.steady, request.policy.prefetch_ttl)) {
      return;  // a cold key: decided as without prefetch
    }
    if (budget_count_.load(std::memory_order_relaxed) >= options_.max_budgets) return;
    auto budget = std::make_shared<Budget>(request.key, request.policy, hash, shard);
    budget->size = FirstLeaseSize(request.policy);
    it = shard.budgets.emplace(budget->Ref(), std::move(budget)).first;
    budget_count_.fetch_add(1, std::memory_order_relaxed);
    out.created = true;
  }
  Budget& b = *it->second;
  b.last_used = now.steady;
  if (b.phase == Phase::kHolding && (b.left == 0 || now.steady >= b.spend_until)) {
    EndLease(b, out.returns);
    if (b.size == 0) {  // auto: no longer hot
      shard.budgets.erase(it);
      budget_count_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
  }
  if (b.phase == Phase::kDenied && now.steady >= b.denied_until) b.phase = Phase::kIdle;
  switch (b.phase) {
    case Phase::kHolding:
      if (request.cost > b.left) return;  // a cost the budget cannot hold: per request
      b.left -= request.cost;
      out.answer = b.Local(now.steady);
      out.route = Route::kAnswered;
      return;
    case Phase::kDenied:
      out.answer = b.RememberedDenial(now.steady);
      out.route = Route::kAnswered;
      return;
    case Phase::kPerRequest:
      return;
    case Phase::kIdle:
    case Phase::kTaking:
      if (request.cost > b.size) return;  // more than a lease holds: per request
      b.waiters.push_back(Budget::Waiter{request.cost, std::move(done)});
      if (b.phase == Phase::kTaking) {
        out.route = Route::kWaiting;
        return;
      }
      b.phase = Phase::kTaking;
      out.route = Route::kTake;
      out.take = it->second;
      out.take_units = b.size;
      return;
  }
}

void Budgets::StartTake(const std::shared_ptr<Budget>& budget, std::int64_t units, Moment sent) {
  const TakeRequest request{budget->key, budget->policy.WithoutPrefetch(), units,
                            budget->policy.prefetch_ttl, std::nullopt};
  backend_->Take(request, [this, budget, sent](absl::StatusOr<Reservation> taken) {
    OnTaken(budget, sent, std::move(taken));
  });
}

void Budgets::OnTaken(const std::shared_ptr<Budget>& budget, Moment sent,
                      absl::StatusOr<Reservation> taken) {
  enum class Next : std::uint8_t { kPerRequest, kAnswer, kQueued };
  std::vector<Budget::Waiter> waiters;
  std::vector<Next> next;
  std::vector<Decision> answers;
  std::vector<Return> returns;
  std::int64_t retake = 0;  // units of the next take, sent at once
  const Moment answered = options_.clock();
  {
    Budget& b = *budget;
    std::lock_guard lock(b.shard.mu);
    waiters.swap(b.waiters);
    next.assign(waiters.size(), Next::kPerRequest);
    answers.resize(waiters.size());
    const bool closed = closed_.load(std::memory_order_relaxed);
    if (!taken.ok() || taken->decision.degraded) {
      // The store failed: each request is decided per request, where on_error applies.
      b.phase = Phase::kIdle;
    } else if (taken->units > 0) {
      b.phase = Phase::kHolding;
      b.id = std::move(taken->id);
      b.units = b.left = taken->units;
      b.taken_at = sent.steady;
      b.spend_until = sent.steady + SpendSpan(b.policy, sent, *taken);
      // A lease the window's end cuts short keeps its unused units: a return could free
      // them for the window's last moments only, and such returns were once seen to let a
      // window admit more than its limit (docs/prefetch_client.md, "Return").
      b.returns_unused = !EndsWithItsWindow(b.policy, *taken);
      b.shared = taken->decision;
      leases_.fetch_add(1, std::memory_order_relaxed);
      units_leased_.fetch_add(static_cast<std::uint64_t>(b.units), std::memory_order_relaxed);
      // The answer came after the lease's spending ended (a window ended while the take was
      // in flight): spent now, its units would cross into the next window. It goes back
      // as it is, and the waiting requests are decided per request (no chase of a lease
      // that could end again before it arrives).
      const bool over = answered.steady >= b.spend_until;
      if (over) {
        if (!b.id.empty()) returns.push_back(Return{std::move(b.id), 0, b.units});
        b.phase = Phase::kIdle;
        b.id.clear();
        b.units = b.left = 0;
      }
      std::vector<Budget::Waiter> again;
      for (std::size_t i = 0; i < waiters.size() && !over; ++i) {
        if (waiters[i].cost <= b.left) {
          b.left -= waiters[i].cost;
          answers[i] = b.Local(answered.steady);
          next[i] = Next::kAnswer;
        } else if (!closed && waiters[i].cost <= b.size) {
          next[i] = Next::kQueued;
          again.push_back(std::move(waiters[i]));
        }
      }
      if (closed && !over) {
        EndLease(b, returns);
      } else if (!again.empty()) {
        // More waited than the lease held: they wait for the next take, sent at once (still
        // one in flight); the lease is drained, so auto's next one is larger.
        EndLease(b, returns);
        b.phase = Phase::kTaking;
        b.waiters = std::move(again);
        retake = b.size;
      }
    } else if (taken->decision.allowed) {
      b.phase = Phase::kPerRequest;  // no lease under this policy and ttl
    } else {
      // Nothing left: denied as the shared state denies a cost-1 request now.
      denied_takes_.fetch_add(1, std::memory_order_relaxed);
      const microseconds retry = taken->decision.retry_after;
      b.phase = Phase::kIdle;
      // Not a blocked denial: when its answers stop being `blocked` is not known here
      // (as in the Redis store's denial cache).
      if (options_.remember_denials.count() > 0 && retry >= options_.remember_denials &&
          !taken->decision.blocked) {
        b.phase = Phase::kDenied;
        b.denial = taken->decision;
        b.denied_at = sent.steady;
        b.denied_until = sent.steady + retry;
      }
      for (std::size_t i = 0; i < waiters.size(); ++i) {
        answers[i] = taken->decision;
        next[i] = Next::kAnswer;
      }
    }
  }
  if (!returns.empty()) SendReturns(returns);
  if (retake > 0) StartTake(budget, retake, answered);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    if (next[i] == Next::kAnswer) {
      local_decisions_.fetch_add(1, std::memory_order_relaxed);
      waiters[i].done(answers[i]);
    } else if (next[i] == Next::kPerRequest) {
      const DecideRequest request{budget->key, budget->policy, waiters[i].cost, std::nullopt};
      PerRequest(request, std::move(waiters[i].done));
    }
  }
}

void Budgets::EndLease(Budget& b, std::vector<Return>& returns) {
  const std::int64_t used = b.units - b.left;
  if (b.left > 0 && !b.id.empty() && b.returns_unused) {
    returns.push_back(Return{std::move(b.id), used, b.left});
  }
  b.size = NextLeaseSize(b.policy, b.size, b.left == 0 ? LeaseEnd::kDrained : LeaseEnd::kExpired,
                         b.units, used);
  b.phase = Phase::kIdle;
  b.id.clear();
  b.units = b.left = 0;
}

void Budgets::SendReturns(std::vector<Return>& returns) {
  {
    std::lock_guard lock(returns_mu_);
    returns_in_flight_ += returns.size();
  }
  for (Return& r : returns) {
    backend_->Settle(SettleRequest{r.id, r.used, std::nullopt},
                     [this, unused = r.unused](absl::StatusOr<Decision> settled) {
                       if (settled.ok()) {
                         units_returned_.fetch_add(static_cast<std::uint64_t>(unused),
                                                   std::memory_order_relaxed);
                       } else {
                         return_failures_.fetch_add(1, std::memory_order_relaxed);
                       }
                       std::lock_guard lock(returns_mu_);
                       if (--returns_in_flight_ == 0) returns_cv_.notify_all();
                     });
  }
}

void Budgets::PerRequest(const DecideRequest& request, DecisionCallback done) {
  per_request_.fetch_add(1, std::memory_order_relaxed);
  DecideRequest shared = request;
  shared.policy = request.policy.WithoutPrefetch();
  backend_->Decide(shared, std::move(done));
}

void Budgets::Sweep(Moment now) {
  std::vector<Return> returns;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    for (auto it = shard->budgets.begin(); it != shard->budgets.end();) {
      Budget& b = *it->second;
      if (b.phase == Phase::kHolding && now.steady >= b.spend_until) EndLease(b, returns);
      const bool idle = b.phase != Phase::kTaking && b.phase != Phase::kHolding &&
                        now.steady - b.last_used > b.IdleAfter();
      if (idle || (b.phase == Phase::kIdle && b.size == 0)) {
        shard->budgets.erase(it++);
        budget_count_.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
  }
  if (!returns.empty()) SendReturns(returns);
}

void Budgets::StartSweeper() {
  if (options_.sweep_every.count() <= 0) return;
  std::lock_guard lock(sweeper_mu_);
  if (sweeper_.joinable() || closed_.load()) return;
  sweeper_ = std::jthread([this](std::stop_token stop) {
    std::unique_lock wait(sweeper_mu_);
    while (!sweeper_cv_.wait_for(wait, stop, options_.sweep_every, [] { return false; })) {
      if (stop.stop_requested()) return;
      wait.unlock();
      Sweep(Moment::Now());
      wait.lock();
    }
  });
}

void Budgets::Close() {
  if (closed_.exchange(true)) return;
  std::jthread sweeper;
  {
    std::lock_guard lock(sweeper_mu_);
    sweeper = std::move(sweeper_);
  }
  sweeper.request_stop();  // joined when `sweeper` goes
  std::vector<Return> returns;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    for (auto& [ref, budget] : shard->budgets) {
      if (budget->phase == Phase::kHolding) EndLease(*budget, returns);
    }
  }
  if (!returns.empty()) SendReturns(returns);
  // The backend answers within its timeout; the bound only guards against one that does not.
  std::unique_lock lock(returns_mu_);
  returns_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return returns_in_flight_ == 0; });
}

PrefetchStats Budgets::stats() const {
  PrefetchStats s;
  s.leases = leases_.load(std::memory_order_relaxed);
  s.units_leased = units_leased_.load(std::memory_order_relaxed);
  s.units_returned = units_returned_.load(std::memory_order_relaxed);
  s.return_failures = return_failures_.load(std::memory_order_relaxed);
  s.local_decisions = local_decisions_.load(std::memory_order_relaxed);
  s.per_request = per_request_.load(std::memory_order_relaxed);
  s.denied_takes = denied_takes_.load(std::memory_order_relaxed);
  s.budgets = budget_count_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace floodgate::prefetch
