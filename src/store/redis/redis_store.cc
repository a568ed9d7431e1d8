// RedisStore: the facade over the Redis store's parts, owning its I/O thread, options, nodes.
#include <absl/random/random.h>
#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <sys/un.h>

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
#include "store/redis/batcher.h"
#include "store/redis/cluster.h"
#include "store/redis/cluster_router.h"
#include "store/redis/connection.h"
#include "store/redis/counters.h"
#include "store/redis/cross_slot.h"
#include "store/redis/dispatch.h"
#include "store/redis/ids.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"
#include "store/redis/resp.h"
#include "store/redis/scripts.h"
#include "store/redis/sentinel.h"
#include "store/redis/startup.h"
#include "store/redis/store_testing.h"
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

class RedisStore::Impl final : public redis::Dispatcher,
                               public redis::CallErrors,
                               public redis::NodeSource {
 public:
  Impl(RedisStoreOptions options, std::unique_ptr<asio::ssl::context> tls,
       std::optional<redis::Batching> forced_batching)
      : options_(std::move(options)),
        tls_(std::move(tls)),
        work_(asio::make_work_guard(io_)),
        handshake_(options_, scripts_, forced_batching),
        outcomes_(options_, counters_),
        cross_slot_(options_, counters_, outcomes_, *this),
        batcher_(io_, options_, scripts_, outcomes_, counters_, *this),
        router_(io_, options_, outcomes_, counters_, batcher_, startup_, nodes_, *this, closed_),
        sentinel_(io_, options_, tls_.get(), startup_, counters_, *this) {
    if (options_.sentinel) {
      // The sentinels name the primary; it gets a node then (NodeFor).
    } else if (!options_.cluster) {
      AddNode({options_.host, options_.port}, options_.Describe(),
              options_.connections_per_server());
    } else {
      // The seeds answer CLUSTER SLOTS; the primaries found there get nodes of their own.
      for (const RedisEndpoint& seed : options_.seeds) {
        // One connection is enough to ask for the topology.
        Node& node = AddNode(seed, HostPort(seed.host, seed.port), 1);
        node.seed = true;
        router_.AddSeed(node);
      }
    }
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
      const absl::Status closed = absl::CancelledError("store closed");
      // Everything not yet answered is answered Cancelled first: stopping a connection
      // fails its calls, whose handlers would otherwise flush what queued behind them to
      // a connection that is no longer there (an error, answered by on_error).
      for (auto& node : nodes_) {
        for (auto& lane : node->lanes) {
          std::deque<UnitPtr> queued;
          {
            std::lock_guard lock(lane->mu);
            queued.swap(lane->queued);
          }
          for (auto& pending : queued) outcomes_.Complete(*pending, closed);
          for (auto& pending : lane->deadlines) outcomes_.Complete(*pending, closed);
          lane->deadlines.clear();
        }
        for (auto& pending : node->waiting) outcomes_.Complete(*pending, closed);
        node->waiting.clear();
      }
      for (auto& node : nodes_) {
        for (auto& lane : node->lanes) {
          lane->connection->Stop();
          lane->sweep.cancel();
        }
      }
      router_.Stop();
      if (options_.sentinel) sentinel_.Stop();
      stopped.set_value();
    });
    stopped.get_future().wait();
  }

  // Connects every connection and waits as redis::Startup::Wait says.
  absl::Status Start() {
    asio::post(io_, [this] {
      if (options_.sentinel) sentinel_.Start();
      for (auto& node : nodes_) StartNode(*node);
    });
    return startup_.Wait(options_, options_.cluster    ? router_.seed_count()
                                   : options_.sentinel ? options_.connections_per_server()
                                                       : nodes_.front()->lanes.size());
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

  // Any thread. Sends a unit on its way: on a cluster to the I/O thread, which routes it
  // by slot; else through the server's (the primary's) breaker to one of its connections.
  void Dispatch(UnitPtr pending, Steady::time_point now) override {
    if (options_.cluster) return router_.Submit(std::move(pending));
    Node* primary = Primary();
    if (primary == nullptr) {
      return outcomes_.Complete(*pending, absl::UnavailableError(LastError()));
    }
    Node& node = *primary;
    pending->route.node = &node;
    if (!node.breaker.Allow(now)) return outcomes_.AnswerWhileOpen(*pending);
    Lane* lane = node.PickLane();
    if (lane == nullptr) {
      return outcomes_.Complete(*pending, absl::UnavailableError(LastError()));
    }
    batcher_.Enqueue(*lane, std::move(pending));
  }

  StoreStats LocalStats() const { return outcomes_.LocalStats(); }

  RedisStats Stats() const {
    RedisStats s = counters_.Stats();
    s.node_batch_refusals = handshake_.node_batch_refusals();
    s.nodes = router_.primary_count();
    const Steady::time_point now = Steady::now();
    std::lock_guard lock(nodes_mu_);
    for (const auto& node : nodes_) s.breaker_open = s.breaker_open || node->breaker.open(now);
    return s;
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
      std::vector<Node*> targets;
      if (options_.cluster) {
        targets = router_.primaries();
      } else if (Node* primary = Primary()) {
        targets.push_back(primary);
      }
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
  // Constructor, or I/O thread. Nodes live as long as the store.
  Node& AddNode(const RedisEndpoint& endpoint, std::string describe, int connections) {
    auto node = std::make_unique<Node>(endpoint, std::move(describe), options_.breaker_failures,
                                       options_.breaker_open);
    redis::ConnectionOptions connection;
    connection.host = endpoint.host;
    connection.port = endpoint.port;
    connection.connect_timeout = options_.connect_timeout;
    connection.reconnect_min = options_.reconnect_min;
    connection.reconnect_max = options_.reconnect_max;
    connection.tls = tls_.get();
    connection.tls_server_name = options_.tls_server_name;
    connection.unix_socket = options_.unix_socket;  // set only for one standalone server
    Node* raw_node = node.get();
    for (int i = 0; i < connections; ++i) {
      auto lane = std::make_unique<Lane>(io_, *node);
      Lane* raw = lane.get();
      lane->connection = std::make_unique<redis::Connection>(
          io_, connection,
          redis::Connection::Hooks{
              [this] { return handshake_.Commands(); },
              [this, raw_node, raw](std::size_t index, const redisReply& reply) {
                return handshake_.Check(raw_node->describe, index, reply, raw->batching);
              },
              [this, raw] { OnReady(*raw); },
              [this, raw](const absl::Status& status) { OnDown(*raw, status); },
          });
      node->lanes.push_back(std::move(lane));
    }
    std::lock_guard lock(nodes_mu_);
    nodes_.push_back(std::move(node));
    return *raw_node;
  }

  static void StartNode(Node& node) {
    for (auto& lane : node.lanes) lane->connection->Start();
  }

  // NodeSource (dispatch.h), for the router.
  Node& NodeFor(const RedisEndpoint& endpoint) override {
    for (auto& node : nodes_) {
      // Seeds have one connection, for discovery; decisions get a node of their own.
      if (node->endpoint == endpoint && !node->seed && !node->retired) return *node;
    }
    Node& node = AddNode(endpoint, HostPort(endpoint.host, endpoint.port),
                         options_.connections_per_server());
    StartNode(node);
    return node;
  }

  // I/O thread: see RedisStore::Health.
  absl::Status HealthOnIoThread() {
    if (closed_) return absl::CancelledError("store closed");
    if (!options_.cluster) {
      if (Node* primary = Primary(); primary != nullptr && primary->PickLane() != nullptr) {
        return absl::OkStatus();
      }
      return absl::UnavailableError(LastError());
    }
    if (router_.primaries().empty()) {
      return absl::UnavailableError(
          fmt::format("redis cluster {}: no slot map yet ({})", options_.Describe(), LastError()));
    }
    for (Node* node : router_.primaries()) {
      if (node->PickLane() == nullptr) {
        return absl::UnavailableError(
            fmt::format("{} ({})", MessageOf(redis::NotConnectedError(*node)), LastError()));
      }
    }
    return absl::OkStatus();
  }

  void OnReady(Lane& lane) {
    lane.ready = true;
    // A connection that finished its handshake (AUTH, SCRIPT LOAD) has heard the server
    // answer: decisions go to it at once, not after the breaker's open period.
    lane.node.breaker.Success();
    if (options_.cluster) return router_.OnLaneReady(lane);
    startup_.LaneReady();
  }

  void OnDown(Lane& lane, const absl::Status& status) {
    if (lane.ready.exchange(false)) ++counters_.reconnects;
    if (options_.cluster) return router_.OnLaneDown(lane, status);
    if (lane.node.retired) return;  // Sentinel: an old primary, stopped on purpose
    startup_.LaneDown(lane, status);
    if (options_.sentinel) sentinel_.OnLaneDown(lane);
  }

  // Standalone: the server; Sentinel: the primary now (nullptr: none known yet). Any
  // thread (nodes_ grows on the I/O thread only with a cluster or Sentinel).
  Node* Primary() { return options_.sentinel ? sentinel_.primary() : nodes_.front().get(); }

  std::string LastError() { return startup_.LastError(options_); }

  // CallErrors (dispatch.h), for the batcher.
  absl::Status NotConnected(const Node& node) override {
    return options_.cluster ? redis::NotConnectedError(node) : absl::UnavailableError(LastError());
  }

  bool Redirected(Lane& lane, std::string_view text, std::vector<UnitPtr>& chunk) override {
    if (options_.sentinel) {
      sentinel_.OnCallError(lane, text);
      return false;  // answered by on_error
    }
    return router_.Redirected(lane, text, chunk);
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
  redis::CrossSlot cross_slot_;
  redis::Batcher batcher_;
  std::mutex random_mu_;
  absl::BitGen random_;  // reservation ids: unpredictable, so one client cannot settle another's
  // Standalone: one node, fixed. Cluster: grows on the I/O thread (a new primary); other
  // threads look only under nodes_mu_ (Stats).
  mutable std::mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_;

  redis::Startup startup_;
  redis::ClusterRouter router_;     // Redis Cluster only
  redis::SentinelRouter sentinel_;  // Redis Sentinel only
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  return redis::StoreTesting::Open(std::move(options), std::nullopt);
}

absl::StatusOr<std::unique_ptr<RedisStore>> redis::StoreTesting::Open(
    RedisStoreOptions options, std::optional<Batching> forced_batching) {
  // FromUrl refuses these with the URL in hand; options built in code are checked here.
  if (!options.unix_socket.empty() &&
      (options.cluster || options.tls ||
       options.unix_socket.size() >= sizeof(sockaddr_un::sun_path))) {
    return absl::InvalidArgumentError(fmt::format(
        "redis unix socket \"{}\": a path of at most {} bytes, for one server without TLS",
        options.unix_socket, sizeof(sockaddr_un::sun_path) - 1));
  }
  if (options.sentinel && (options.cluster || !options.unix_socket.empty() ||
                           options.seeds.empty() || options.sentinel_master.empty())) {
    return absl::InvalidArgumentError(
        "redis sentinel: sentinels (seeds) and the master's name, over TCP, not a cluster");
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (options.tls) {
    auto context = MakeTlsContext(options);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }
  auto impl =
      std::make_unique<RedisStore::Impl>(std::move(options), std::move(tls), forced_batching);
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
bool RedisStore::Ping() { return impl_->Ping(); }
absl::Status RedisStore::Health() { return impl_->Health(); }

}  // namespace floodgate
