// RedisStore: the facade over the Redis store's parts, owning its I/O thread and options.
#include <absl/random/random.h>
#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <variant>

#include "common/strings.h"
#include "core/state_kind.h"
#include "store/prefetch/budgets.h"
#include "store/redis/cluster.h"
#include "store/redis/counters.h"
#include "store/redis/cross_slot.h"
#include "store/redis/ids.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"
#include "store/redis/resp.h"
#include "store/redis/scripts.h"
#include "store/redis/store_testing.h"
#include "store/redis/topology.h"
#include "store/redis/unit.h"

namespace floodgate {

namespace {

namespace asio = boost::asio;
using core::StateKind;
using redis::Item;
using redis::Lane;
using redis::Node;
using redis::Steady;
using redis::Unit;
using redis::UnitPtr;

// The sync calls over the async ones: runs `start` with a callback and waits for its
// answer. The waiter is shared with the callback, which may still be returning when the
// caller has its answer.
template <class T, class Start>
T Await(Start&& start) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<T> result;
  };
  auto waiter = std::make_shared<Waiter>();
  start([waiter](T result) {
    std::lock_guard lock(waiter->mu);
    waiter->result = std::move(result);
    waiter->cv.notify_one();
  });
  std::unique_lock lock(waiter->mu);
  waiter->cv.wait(lock, [&] { return waiter->result.has_value(); });
  return *std::move(waiter->result);
}

}  // namespace

// The TLS settings every connection shares; file errors surface here, at Open.
absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const RedisStoreOptions& o) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  context->set_verify_mode(asio::ssl::verify_peer, ec);
  if (o.tls_ca.empty()) {
    context->set_default_verify_paths(ec);  // the system store; honours SSL_CERT_FILE
  } else {
    context->load_verify_file(o.tls_ca, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          fmt::format("cannot read the CA file \"{}\": {}", o.tls_ca, ec.message()));
    }
  }
  if (!o.tls_cert.empty()) {
    context->use_certificate_chain_file(o.tls_cert, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          fmt::format("cannot read the client certificate \"{}\": {}", o.tls_cert, ec.message()));
    }
    context->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          fmt::format("cannot read the client key \"{}\": {}", o.tls_key, ec.message()));
    }
  }
  return context;
}

class RedisStore::Impl final {
 public:
  Impl(RedisStoreOptions options, redis::TopologyKind kind, std::unique_ptr<asio::ssl::context> tls,
       std::optional<redis::Batching> forced_batching)
      : options_(std::move(options)),
        tls_(std::move(tls)),
        work_(asio::make_work_guard(io_)),
        handshake_(options_, scripts_, forced_batching),
        outcomes_(options_, counters_),
        topology_(redis::Topology::Make(
            kind, redis::TopologyParts{io_, options_, tls_.get(), scripts_, handshake_, outcomes_,
                                       counters_, closed_})),
        cross_slot_(options_, counters_, outcomes_, *topology_) {
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Impl() {
    Close();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // Answers every decision still pending (Cancelled) and stops every connection; later
  // decisions are answered by on_error. Idempotent; not from the I/O thread.
  void Close() {
    if (closed_.exchange(true)) return;
    std::promise<void> stopped;
    asio::post(io_, [this, &stopped] {
      topology_->Close();
      stopped.set_value();
    });
    stopped.get_future().wait();
  }

  // Connects every connection and waits as the topology says (startup.h).
  absl::Status Start() {
    asio::post(io_, [this] { topology_->Start(); });
    return topology_->WaitStarted();
  }

  std::string RedisKey(StateKind kind, std::string_view key) const {
    return redis::RedisKey(options_.prefix, kind, key);
  }

  void Submit(const DecideRequest& request, DecisionCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    std::string redis_key = RedisKey(kind, request.key);
    const Steady::time_point now = Steady::now();
    const bool server_clock = !request.now.has_value();
    // The denial cache and the breaker reason in this process's clock, so they only
    // serve decisions taken at the server's clock.
    if (server_clock && options_.denial_cache_min.count() > 0) {
      if (auto cached = outcomes_.CachedDenial(redis_key, request.policy, request.cost, now)) {
        ++counters_.denial_cache_hits;
        done(*cached);
        return;
      }
    }
    const std::size_t key_at = redis_key.size() - request.key.size();
    auto pending = std::make_shared<Unit>();
    pending->items.push_back(
        Item{std::move(redis_key), key_at, request.policy, request.cost, kind});
    if (request.now) pending->now_us = request.now->time_since_epoch().count();
    pending->items.front().calendar = redis::CalendarArgument(request.policy, pending->now_us);
    pending->deadline = now + options_.timeout;
    pending->op = redis::Decide{std::move(done)};
    Dispatch(std::move(pending), now);
  }

  // envoyproxy/ratelimit's counter (lua/upstream.lua): the key as it is, no prefix or tag.
  void Count(const CountRequest& request, CountCallback done) {
    auto pending = std::make_shared<Unit>();
    pending->items.push_back(
        Item{std::string(request.key), 0, Policy{}, request.hits, StateKind::kFixedWindow});
    pending->op = redis::Count{request.ttl.count(), 0, std::move(done)};
    const Steady::time_point now = Steady::now();
    pending->deadline = now + options_.timeout;
    Dispatch(std::move(pending), now);
  }

  // Operating a key (lua/operate.lua), always in a call of its own. A prefetch policy's
  // key is operated on in Redis: budgets already leased to processes stay theirs.
  void Operate(const OperateRequest& request, DecisionCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    std::string redis_key = RedisKey(kind, request.key);
    const std::size_t key_at = redis_key.size() - request.key.size();
    auto pending = std::make_shared<Unit>();
    pending->items.push_back(Item{std::move(redis_key), key_at, request.policy, 0, kind});
    if (request.now) pending->now_us = request.now->time_since_epoch().count();
    pending->items.front().calendar = redis::CalendarArgument(request.policy, pending->now_us);
    pending->op = redis::Operate{request.operation, request.units, std::move(done)};
    const Steady::time_point now = Steady::now();
    pending->deadline = now + options_.timeout;
    Dispatch(std::move(pending), now);
  }

  // ---- reservations (docs/reservations.md) ----

  void SubmitReservation(redis::Operation op, Item item, std::optional<TimePoint> now) {
    auto pending = std::make_shared<Unit>();
    pending->op = std::move(op);
    pending->items.push_back(std::move(item));
    if (now) pending->now_us = now->time_since_epoch().count();
    const Steady::time_point at = Steady::now();
    pending->deadline = at + options_.timeout;
    Dispatch(std::move(pending), at);
  }

  // A reservation's limit key, its slot, the key's place in it, and the random part of its
  // record's key (or lease's member).
  struct Placed {
    std::string redis_key;
    int slot;
    std::size_t key_at;
    std::uint64_t random;
  };
  Placed Place(StateKind kind, std::string_view key) {
    std::string redis_key = RedisKey(kind, key);
    const int slot = redis::SlotOf(redis_key);
    const std::size_t key_at = redis_key.size() - key.size();
    std::lock_guard lock(random_mu_);
    return Placed{std::move(redis_key), slot, key_at, absl::Uniform<std::uint64_t>(random_)};
  }

  void Reserve(const ReserveRequest& request, ReservationCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    auto [redis_key, slot, key_at, random] = Place(kind, request.key);
    // As this process's clock sees it (Redis decides on its own).
    const TimePoint expires = (request.now ? *request.now : SystemNow()) + request.hold;
    const bool lease = kind == StateKind::kConcurrency;
    std::string lease_random = lease ? redis::LeaseRandom(random) : std::string();
    // Gets the decision and, for an admitted acquire, its lease's acquire time.
    redis::HeldCallback answer =
        // Init-captures: clang before 16 cannot capture structured bindings by name.
        [slot = slot, random = random, expires, lease_random, policy = request.policy,
         estimate = request.estimate, key = lease ? std::string(request.key) : std::string(),
         done = std::move(done)](absl::StatusOr<Decision> d, std::int64_t acquired_at) mutable {
          if (!d.ok()) return done(d.status());
          Reservation reservation;
          reservation.decision = *d;
          // A degraded answer (on_error) holds no record: there is nothing to settle.
          if (d->allowed && !d->degraded) {
            reservation.id = lease_random.empty()
                                 ? redis::ReservationId(slot, random)
                                 : redis::LeaseId(key, lease_random, policy, acquired_at);
            reservation.expires = expires;
            reservation.units = estimate;
          }
          done(std::move(reservation));
        };
    Item item{std::move(redis_key), key_at, request.policy, request.estimate, kind};
    if (lease) {
      return SubmitReservation(redis::LeaseAcquire{std::move(lease_random), 0, std::move(answer)},
                               std::move(item), request.now);
    }
    SubmitReservation(
        redis::Reserve{redis::RecordKey(options_.prefix, slot, random), request.hold.count(),
                       [answer = std::move(answer)](absl::StatusOr<Decision> d) mutable {
                         answer(std::move(d), 0);
                       }},
        std::move(item), request.now);
  }

  // take(k, δ) (lua/take.lua): lua/reservation.lua's 't', which answers as a reserve with
  // the units leased in place of the acquire time and the lease's length in place of the
  // allowed decision's retry_after (0).
  void Take(const TakeRequest& request, ReservationCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    auto [redis_key, slot, key_at, random] = Place(kind, request.key);
    const TimePoint asked = request.now ? *request.now : SystemNow();
    redis::Take take;
    take.record_key = redis::RecordKey(options_.prefix, slot, random);
    take.lifetime_us = request.lifetime.count();
    take.done = [slot = slot, random = random, asked, done = std::move(done)](
                    absl::StatusOr<Decision> d, std::int64_t units) mutable {
      if (!d.ok()) return done(d.status());
      Reservation reservation;
      reservation.decision = *d;
      if (d->allowed && !d->degraded && units > 0) {
        reservation.id = redis::ReservationId(slot, random);
        reservation.expires = asked + d->retry_after;
        reservation.units = units;
        reservation.decision.retry_after = std::chrono::microseconds(0);
      }
      done(std::move(reservation));
    };
    SubmitReservation(std::move(take),
                      Item{std::move(redis_key), key_at, request.policy, request.up_to, kind},
                      request.now);
  }

  void Settle(const SettleRequest& request, DecisionCallback done) {
    absl::StatusOr<redis::SettleTarget> target = redis::ParseSettleId(request.id);
    if (!target.ok()) return done(target.status());
    if (auto* lease = std::get_if<redis::LeaseRef>(&*target)) {
      std::string redis_key = RedisKey(StateKind::kConcurrency, lease->key);
      const std::size_t key_at = redis_key.size() - lease->key.size();
      return SubmitReservation(
          redis::LeaseRelease{std::move(lease->member), std::move(done)},
          Item{std::move(redis_key), key_at, Policy{}, request.actual, StateKind::kConcurrency},
          request.now);
    }
    const auto& record = std::get<redis::ReservationRef>(*target);
    SubmitReservation(redis::Settle{std::move(done)},
                      Item{redis::RecordKey(options_.prefix, record.slot, record.random), 0,
                           Policy{}, request.actual, StateKind::kGcra},
                      request.now);
  }

  // Any thread. Sends a unit on its way, as the topology routes it.
  void Dispatch(UnitPtr pending, Steady::time_point now) {
    topology_->Dispatch(std::move(pending), now);
  }

  StoreStats LocalStats() const { return outcomes_.LocalStats(); }

  RedisStats Stats() const {
    RedisStats s = counters_.Stats();
    s.node_batch_refusals = handshake_.node_batch_refusals();
    topology_->AddStats(s);
    return s;
  }

  void AppendTopologyMetrics(const RedisStats& stats, std::string& out) const {
    topology_->AppendMetrics(stats, out);
  }

  // Every primary (the one server, standalone) answers PING within the timeout.
  bool Ping() {
    struct Round {
      std::promise<bool> done;
      std::size_t left = 0;
      bool failed = false;
      void Answer(bool ok) {
        if (failed) return;
        if (!ok) {
          failed = true;
          return done.set_value(false);
        }
        if (--left == 0) done.set_value(true);
      }
    };
    auto round = std::make_shared<Round>();
    auto result = round->done.get_future();
    asio::post(io_, [this, round] {
      const std::vector<Node*> targets = topology_->Primaries();
      if (targets.empty()) return round->done.set_value(false);
      round->left = targets.size();
      std::string command;
      redis::AppendCommand(command, {"PING"});
      for (Node* node : targets) {
        Lane* lane = node->PickLane();
        if (lane == nullptr) return round->Answer(false);
        lane->connection->Send(command, [round](absl::StatusOr<redis::Reply> reply) {
          round->Answer(reply.ok() && (*reply)->type == REDIS_REPLY_STATUS);
        });
        if (round->failed) return;
      }
    });
    return result.wait_for(options_.timeout) == std::future_status::ready && result.get();
  }

  absl::Status Health() {
    auto answer = std::make_shared<std::promise<absl::Status>>();
    auto result = answer->get_future();
    asio::post(io_, [this, answer] { answer->set_value(HealthOnIoThread()); });
    // The I/O thread answers in microseconds unless it is stuck, which is news too.
    if (result.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      return absl::DeadlineExceededError(fmt::format(
          "redis store {}: its I/O thread did not answer within 1 s", options_.Describe()));
    }
    return result.get();
  }

  const RedisStoreOptions& options() const { return options_; }

  void SubmitAll(const MultiRequest& request, MultiCallback done) {
    cross_slot_.Submit(request, std::move(done));
  }

 private:
  // I/O thread: see RedisStore::Health.
  absl::Status HealthOnIoThread() {
    if (closed_) return absl::CancelledError("store closed");
    return topology_->Health();
  }

  RedisStoreOptions options_;
  std::unique_ptr<asio::ssl::context> tls_;  // null without TLS
  std::atomic<bool> closed_{false};
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  redis::Counters counters_;
  redis::Scripts scripts_;
  redis::Handshake handshake_;
  redis::Outcomes outcomes_;
  // Chosen once from the options; owns the nodes, their connections and the batcher.
  std::unique_ptr<redis::Topology> topology_;
  redis::CrossSlot cross_slot_;
  std::mutex random_mu_;
  // Reservation ids: unpredictable, so one client cannot settle another's, and distinct
  // across processes forked from one parent (IdGenerator).
  absl::BitGen random_ = redis::IdGenerator();
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  return redis::StoreTesting::Open(std::move(options), std::nullopt);
}

absl::StatusOr<std::unique_ptr<RedisStore>> redis::StoreTesting::Open(
    RedisStoreOptions options, std::optional<Batching> forced_batching) {
  // FromUrl refuses bad forms with the URL in hand; options built in code are checked here.
  const absl::StatusOr<TopologyKind> kind = TopologyOf(options);
  if (!kind.ok()) return kind.status();
  std::unique_ptr<asio::ssl::context> tls;
  if (options.tls) {
    auto context = MakeTlsContext(options);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }
  auto impl = std::make_unique<RedisStore::Impl>(std::move(options), *kind, std::move(tls),
                                                 forced_batching);
  if (absl::Status status = impl->Start(); !status.ok()) return status;
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  prefetch::BudgetOptions budget_options;
  budget_options.remember_denials = impl_->options().denial_cache_min;
  // Takes and returns go through the store's own calls; a budget's per-request decisions
  // straight to Redis (through the store they would come back to the budgets).
  budgets_ = std::make_unique<prefetch::Budgets>(
      std::make_unique<prefetch::StoreBackend>(
          *this,
          [impl = impl_.get()](const DecideRequest& request, DecisionCallback done) {
            impl->Submit(request, std::move(done));
          }),
      budget_options);
}

// Budgets return their units before the connections close.
RedisStore::~RedisStore() { Close(); }

void RedisStore::Route(const DecideRequest& request, DecisionCallback done) {
  if (request.policy.prefetch != Prefetch::kOff) return budgets_->Decide(request, std::move(done));
  impl_->Submit(request, std::move(done));
}

void RedisStore::DecideAsyncValidated(const DecideRequest& request, DecisionCallback done) {
  Route(request, std::move(done));
}

absl::StatusOr<Decision> RedisStore::DecideValidated(const DecideRequest& request) {
  return Await<absl::StatusOr<Decision>>([&](auto done) { Route(request, std::move(done)); });
}

void RedisStore::ReserveAsyncValidated(const ReserveRequest& request, ReservationCallback done) {
  impl_->Reserve(request, std::move(done));
}

void RedisStore::SettleAsyncValidated(const SettleRequest& request, DecisionCallback done) {
  impl_->Settle(request, std::move(done));
}

absl::StatusOr<Reservation> RedisStore::ReserveValidated(const ReserveRequest& request) {
  return Await<absl::StatusOr<Reservation>>(
      [&](auto done) { impl_->Reserve(request, std::move(done)); });
}

absl::StatusOr<Reservation> RedisStore::TakeValidated(const TakeRequest& request) {
  return Await<absl::StatusOr<Reservation>>(
      [&](auto done) { impl_->Take(request, std::move(done)); });
}

void RedisStore::TakeAsyncValidated(const TakeRequest& request, ReservationCallback done) {
  impl_->Take(request, std::move(done));
}

absl::StatusOr<Decision> RedisStore::SettleValidated(const SettleRequest& request) {
  return Await<absl::StatusOr<Decision>>(
      [&](auto done) { impl_->Settle(request, std::move(done)); });
}

void RedisStore::OperateAsyncValidated(const OperateRequest& request, DecisionCallback done) {
  impl_->Operate(request, std::move(done));
}

absl::StatusOr<Decision> RedisStore::OperateValidated(const OperateRequest& request) {
  return Await<absl::StatusOr<Decision>>(
      [&](auto done) { impl_->Operate(request, std::move(done)); });
}

void RedisStore::CountAsyncValidated(const CountRequest& request, CountCallback done) {
  impl_->Count(request, std::move(done));
}

absl::StatusOr<CountAnswer> RedisStore::CountValidated(const CountRequest& request) {
  return Await<absl::StatusOr<CountAnswer>>(
      [&](auto done) { impl_->Count(request, std::move(done)); });
}

StoreStats RedisStore::Stats() const { return impl_->LocalStats(); }
std::string RedisStore::Describe() const { return impl_->options().Describe(); }
void RedisStore::Close() {
  budgets_->Close();
  impl_->Close();
}

RedisStats RedisStore::redis_stats() const {
  RedisStats stats = impl_->Stats();
  const prefetch::PrefetchStats budgets = budgets_->stats();
  stats.prefetch_leases = budgets.leases;
  stats.prefetch_units_leased = budgets.units_leased;
  stats.prefetch_units_returned = budgets.units_returned;
  stats.prefetch_local_decisions = budgets.local_decisions;
  stats.prefetch_budgets = budgets.budgets;
  return stats;
}

void RedisStore::DecideAllAsyncValidated(const MultiRequest& request, MultiCallback done) {
  impl_->SubmitAll(request, std::move(done));
}

absl::StatusOr<MultiDecision> RedisStore::DecideAllValidated(const MultiRequest& request) {
  return Await<absl::StatusOr<MultiDecision>>(
      [&](auto done) { impl_->SubmitAll(request, std::move(done)); });
}
const RedisStoreOptions& RedisStore::options() const { return impl_->options(); }
void RedisStore::AppendTopologyMetrics(const RedisStats& stats, std::string& out) const {
  impl_->AppendTopologyMetrics(stats, out);
}
bool RedisStore::Ping() { return impl_->Ping(); }
absl::Status RedisStore::Health() { return impl_->Health(); }

}  // namespace floodgate
