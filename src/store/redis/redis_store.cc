#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>
#include <absl/random/random.h>
#include <absl/status/status.h>
#include <absl/strings/escaping.h>
#include <floodgate/memory_store.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "core/multi.h"
#include "core/state_kind.h"
#include "store/redis/breaker.h"
#include "store/redis/cluster.h"
#include "store/redis/connection.h"
#include "store/redis/decode.h"
#include "store/redis/denial_cache.h"
#include "store/redis/lua_sources.h"

namespace floodgate {

namespace {

namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;
using core::StateKind;

enum ScriptId : int {
  kScriptGcra,
  kScriptTokenBucket,
  kScriptSlidingLog,
  kScriptSlidingWindow,
  kScriptFixedWindow,
  kScriptConcurrency,
  kScriptBatch,
  kScriptReservation,
  kScriptCount,
};

ScriptId SingleScriptFor(StateKind kind) {
  switch (kind) {
    case StateKind::kGcra:
      return kScriptGcra;
    case StateKind::kSmoothBucket:
    case StateKind::kIntervalBucket:
      return kScriptTokenBucket;
    case StateKind::kSlidingLog:
      return kScriptSlidingLog;
    case StateKind::kSlidingWindow:
      return kScriptSlidingWindow;
    case StateKind::kFixedWindow:
      return kScriptFixedWindow;
    case StateKind::kConcurrency:
      return kScriptConcurrency;
  }
  return kScriptGcra;
}

// lua/ assembled as described in lua_sources.h: one script per algorithm, one batch.
std::string AssembleScript(ScriptId id) {
  namespace l = redis::lua;
  switch (id) {
    case kScriptGcra:
      return l::SingleScript(l::k_gcra);
    case kScriptTokenBucket:
      return l::SingleScript(l::k_token_bucket);
    case kScriptSlidingLog:
      return l::SingleScript(l::k_sliding_log);
    case kScriptSlidingWindow:
      return l::SingleScript(l::k_sliding_window);
    case kScriptFixedWindow:
      return l::SingleScript(l::k_fixed_window);
    case kScriptConcurrency:
      return l::SingleScript(l::k_concurrency);
    case kScriptBatch:
    case kScriptCount:
      break;
    case kScriptReservation:
      return l::DriverScript(l::k_reservation);
  }
  return l::DriverScript(l::k_batch);
}

struct Node;

// One key of a call: a single decision's, or one item of a multi-decision.
struct PendingItem {
  std::string redis_key;  // <prefix><tag>:<key>
  std::size_t key_at;     // where the caller's key starts in redis_key (for on_error=local)
  Policy policy;
  std::int64_t cost;
  StateKind kind;
  bool shadow = false;
};

// What lua/batch.lua does with a group of items (docs/multi.md): a single decision is no
// group; kAll decides a multi-decision's items all or nothing, kDry decides them and
// consumes nothing, kRelease gives back what an earlier kAll consumed. kReserve and
// kSettle are lua/reservation.lua's operations (docs/reservations.md), one item each,
// answered like a single decision.
enum class UnitMode : std::uint8_t { kSingle, kAll, kDry, kRelease, kReserve, kSettle };

// A group's answer: its items' decisions, and the server time the script read (0: none).
struct UnitResult {
  std::vector<Decision> items;
  std::int64_t clock_us = 0;
};
using UnitCallback = absl::AnyInvocable<void(absl::StatusOr<UnitResult>)>;

// What goes through Redis as one unit: a single decision, or a group of a multi-decision's
// items on one slot, which a call never splits. Touched only on the I/O thread once queued.
struct PendingDecision {
  absl::InlinedVector<PendingItem, 1> items;  // kSingle: exactly one
  UnitMode mode = UnitMode::kSingle;
  std::int64_t release_at = 0;  // kRelease: when the items were admitted
  // kReserve: the record's key (the item's is the limit's) and the hold. kSettle: the
  // item's key is the record's, its cost the actual. A lease keeps no record
  // (lua/concurrency.lua): its acquire (kReserve) and release (kSettle) name the
  // concurrency key as the item's, and `lease` holds the lease's random part or its
  // member; the reply gives an admitted acquire's time, kept in acquired_at.
  std::string record_key;
  std::string lease;
  std::int64_t acquired_at = 0;
  std::int64_t hold_us = 0;
  std::optional<std::int64_t> now_us;
  Steady::time_point deadline;
  DecisionCallback done;   // kSingle
  UnitCallback unit_done;  // the groups
  bool answered = false;
  int slot = 0;                 // Redis Cluster: the items' slot
  Node* node = nullptr;         // where it was sent (whose breaker its outcome feeds)
  Node* admitted_by = nullptr;  // the node whose breaker let it through (retries skip it)
  int redirects = 0;            // MOVED / ASK / TRYAGAIN followed so far
  bool alone = false;           // sent in a call of its own (after TRYAGAIN on a batch)
  // kAll: the group is its whole multi-decision (one slot), so nothing will be released
  // later and the server clock it decided at is not needed.
  bool whole = false;

  const PendingItem& item() const { return items.front(); }
  // Decided by the algorithm's own script when alone in a call: a single decision, or a
  // whole multi-decision of one item, which is that item's single decision (docs/multi.md),
  // its shadow flag aside (the caller applies it).
  bool single() const {
    return mode == UnitMode::kSingle || (mode == UnitMode::kAll && whole && items.size() == 1);
  }
  bool reservation() const { return mode == UnitMode::kReserve || mode == UnitMode::kSettle; }
};
using PendingPtr = std::shared_ptr<PendingDecision>;

// A script call's reply or error, as the caller of one connection gets it.
constexpr int kMaxRedirects = 5;
// A storm of redirects or dropped connections asks for one topology refresh per this.
constexpr auto kRefreshInterval = std::chrono::milliseconds(100);
// TRYAGAIN (a multi-key call during a migration) and CLUSTERDOWN are retried after this.
constexpr auto kRetryDelay = std::chrono::milliseconds(10);

// One connection to a server and what queues for it. Filled by any thread, drained on
// the I/O thread.
struct Lane {
  Lane(asio::io_context& io, Node& node) : node(node), sweep(io) {}
  Node& node;
  std::unique_ptr<redis::Connection> connection;
  std::atomic<bool> ready{false};
  // Filled by any thread, drained by Flush on the I/O thread.
  std::mutex mu;
  std::deque<PendingPtr> queued;
  bool flush_posted = false;
  // I/O thread only: script calls sent and not yet answered, and whether Flush left
  // decisions queued because enough calls were out (see kCallsOutWhenBatching).
  int calls_out = 0;
  bool holding = false;
  // I/O thread only: decisions sent, oldest first, for the timeout sweep.
  std::deque<PendingPtr> deadlines;
  asio::steady_timer sweep;
  bool sweeping = false;
  bool reported_down = false;  // counted in failed_lanes_ (start-up)
};

// A Redis server: the standalone one, or one cluster primary (or seed). Its breaker
// opens on its own failures only, so a node that is down degrades only its keys.
struct Node {
  Node(RedisEndpoint endpoint, std::string describe, int threshold,
       std::chrono::microseconds open_for)
      : endpoint(std::move(endpoint)),
        describe(std::move(describe)),
        breaker(threshold, open_for) {}
  const RedisEndpoint endpoint;
  const std::string describe;  // for messages
  std::vector<std::unique_ptr<Lane>> lanes;
  std::atomic<std::size_t> next_lane{0};
  redis::Breaker breaker;
  bool seed = false;  // Redis Cluster: only asked for the topology
  // Redis Cluster, I/O thread only. A node found by a redirect or a new topology has not
  // connected yet: its decisions wait here (bounded by their deadlines) until it does,
  // rather than failing and opening its breaker just as it takes over.
  bool ever_ready = false;
  std::deque<PendingPtr> waiting;
  // Out of the slot map (an old primary): connections stopped, never routed to again.
  bool retired = false;
  // Answered CLUSTER SLOTS with an error (a loading or non-cluster node): asked last.
  bool refused_topology = false;

  // I/O thread: no connection is ready, and one has failed, so this is not a node still
  // making its first connections (they are not a reason to ask for the topology again:
  // a first attempt that fails asks by itself).
  bool Unreachable() {
    return PickLane() == nullptr &&
           (ever_ready || std::any_of(lanes.begin(), lanes.end(),
                                      [](const auto& lane) { return lane->reported_down; }));
  }

  // A ready connection, round-robin; nullptr when none is. Thread-safe.
  Lane* PickLane() {
    const std::size_t n = lanes.size();
    const std::size_t start = next_lane.fetch_add(1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      Lane* lane = lanes[(start + i) % n].get();
      if (lane->ready.load(std::memory_order_relaxed)) return lane;
    }
    return nullptr;
  }
};

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

class RedisStore::Impl {
 public:
  Impl(RedisStoreOptions options, std::unique_ptr<asio::ssl::context> tls)
      : options_(std::move(options)),
        tls_(std::move(tls)),
        work_(asio::make_work_guard(io_)),
        denials_(options_.denial_cache_size),
        refresh_timer_(io_),
        owners_(redis::kClusterSlots, nullptr) {
    for (int i = 0; i < kScriptCount; ++i) scripts_[i].body = AssembleScript(ScriptId(i));
    if (!options_.cluster) {
      AddNode({options_.host, options_.port}, options_.Describe(), options_.connections);
    } else {
      // The seeds answer CLUSTER SLOTS; the primaries found there get nodes of their own.
      for (const RedisEndpoint& seed : options_.seeds) {
        // One connection is enough to ask for the topology.
        Node& node = AddNode(seed, HostPort(seed.host, seed.port), 1);
        node.seed = true;
        seeds_.push_back(&node);
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
      refresh_timer_.cancel();
      const absl::Status closed = absl::CancelledError("store closed");
      // Everything not yet answered is answered Cancelled first: stopping a connection
      // fails its calls, whose handlers would otherwise flush what queued behind them to
      // a connection that is no longer there (an error, answered by on_error).
      for (auto& node : nodes_) {
        for (auto& lane : node->lanes) {
          std::deque<PendingPtr> queued;
          {
            std::lock_guard lock(lane->mu);
            queued.swap(lane->queued);
          }
          for (auto& pending : queued) Complete(*pending, closed);
          for (auto& pending : lane->deadlines) Complete(*pending, closed);
          lane->deadlines.clear();
        }
        for (auto& pending : node->waiting) Complete(*pending, closed);
        node->waiting.clear();
      }
      for (auto& node : nodes_) {
        for (auto& lane : node->lanes) {
          lane->connection->Stop();
          lane->sweep.cancel();
        }
      }
      std::deque<PendingPtr> unrouted;
      {
        std::lock_guard lock(route_mu_);
        unrouted.swap(route_queue_);
      }
      for (auto& pending : unrouted) Complete(*pending, absl::CancelledError("store closed"));
      stopped.set_value();
    });
    stopped.get_future().wait();
  }

  // Standalone: connects every connection; succeeds once one is ready, fails with the
  // first error when none gets there. Cluster: succeeds once a seed told the topology
  // and every primary's connections were tried. With lazy_connect it waits the same way
  // (so that a Redis that is up serves the very first decision), at most connect_timeout,
  // and succeeds whatever came of it: the connections keep trying in the background.
  absl::Status Start() {
    asio::post(io_, [this] {
      for (auto& node : nodes_) StartNode(*node);
    });
    std::unique_lock lock(start_mu_);
    const auto patience = options_.lazy_connect
                              ? options_.connect_timeout
                              : options_.connect_timeout + std::chrono::seconds(1);
    const bool settled = start_cv_.wait_for(lock, patience, [this] {
      if (options_.cluster)
        return cluster_settled_ || !topology_error_.ok() || failed_lanes_ >= seeds_.size();
      return ready_lanes_ > 0 || failed_lanes_ >= nodes_.front()->lanes.size();
    });
    if (options_.lazy_connect) return absl::OkStatus();
    if (options_.cluster) {
      if (topology_known_) return absl::OkStatus();
      if (!topology_error_.ok()) return topology_error_;
    } else if (ready_lanes_ > 0) {
      return absl::OkStatus();
    }
    if (!settled || first_error_.ok()) {
      return absl::DeadlineExceededError(
          fmt::format("redis unreachable at {}: no answer", options_.Describe()));
    }
    return first_error_;
  }

  std::string RedisKey(StateKind kind, std::string_view key) const {
    std::string redis_key = options_.prefix;
    redis_key.append(core::KeyTag(kind)).append(":").append(key);
    return redis_key;
  }

  void Submit(const DecideRequest& request, DecisionCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    std::string redis_key = RedisKey(kind, request.key);
    const Steady::time_point now = Steady::now();
    const bool server_clock = !request.now.has_value();
    // The denial cache and the breaker reason in this process's clock, so they only
    // serve decisions taken at the server's clock.
    if (server_clock && options_.denial_cache_min.count() > 0) {
      if (auto cached = denials_.Lookup(redis_key, request.policy, request.cost, now)) {
        ++stats_.denial_cache_hits;
        done(*cached);
        return;
      }
    }
    const std::size_t key_at = redis_key.size() - request.key.size();
    auto pending = std::make_shared<PendingDecision>();
    pending->items.push_back(
        PendingItem{std::move(redis_key), key_at, request.policy, request.cost, kind});
    if (request.now) pending->now_us = request.now->time_since_epoch().count();
    pending->deadline = now + options_.timeout;
    pending->done = std::move(done);
    Dispatch(std::move(pending), now);
  }

  // ---- reservations (docs/reservations.md) ----

  // A reservation id: the limit key's slot (4 hex digits) and 16 random ones. Its record
  // lives at <prefix>res:{<a tag of that slot>}:<random>, on the limit key's node.
  std::string RecordKey(int slot, std::uint64_t random) const {
    return fmt::format("{}res:{{{}}}:{:016x}", options_.prefix, redis::SlotTag(slot), random);
  }

  // A lease's id: the caller's key (base64url, unpadded: keys are binary), a dot, and the
  // lease's member in its key (lua/concurrency.lua: 16 random hex digits, T, N and the
  // acquire time, dot-separated). The release needs nothing else, so no record is kept:
  // the member is found by its ZREM or the lease is not held. At most
  // kMaxReservationIdBytes (include/floodgate/reservation.h).
  static std::string LeaseId(std::string_view key, std::string_view random, const Policy& policy,
                             std::int64_t acquired_at) {
    return fmt::format("{}.{}.{}.{}.{}",
                       absl::WebSafeBase64Escape(absl::string_view(key.data(), key.size())), random,
                       policy.period.count(), policy.limit, acquired_at);
  }

  // `done` gets the decision and, for an admitted acquire, its lease's acquire time.
  void SubmitReservation(UnitMode mode, PendingItem item, std::string record_key, std::string lease,
                         std::int64_t hold_us, std::optional<TimePoint> now,
                         absl::AnyInvocable<void(absl::StatusOr<Decision>, std::int64_t)> done) {
    auto pending = std::make_shared<PendingDecision>();
    pending->mode = mode;
    pending->items.push_back(std::move(item));
    pending->record_key = std::move(record_key);
    pending->lease = std::move(lease);
    pending->hold_us = hold_us;
    if (now) pending->now_us = now->time_since_epoch().count();
    const Steady::time_point at = Steady::now();
    pending->deadline = at + options_.timeout;
    // The unit outlives the call of its own `done` (Complete calls it through the unit).
    pending->done = [unit = pending.get(),
                     done = std::move(done)](absl::StatusOr<Decision> d) mutable {
      done(std::move(d), unit->acquired_at);
    };
    Dispatch(std::move(pending), at);
  }

  void Reserve(const ReserveRequest& request, ReservationCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    std::string redis_key = RedisKey(kind, request.key);
    const int slot = redis::SlotOf(redis_key);
    std::uint64_t random = 0;
    {
      std::lock_guard lock(random_mu_);
      random = absl::Uniform<std::uint64_t>(random_);
    }
    const std::size_t key_at = redis_key.size() - request.key.size();
    // As this process's clock sees it (Redis decides on its own).
    const TimePoint expires = (request.now ? *request.now : SystemNow()) + request.hold;
    const bool lease = kind == StateKind::kConcurrency;
    std::string lease_random = lease ? fmt::format("{:016x}", random) : std::string();
    SubmitReservation(
        UnitMode::kReserve,
        PendingItem{std::move(redis_key), key_at, request.policy, request.estimate, kind},
        lease ? std::string() : RecordKey(slot, random), lease_random, request.hold.count(),
        request.now,
        [slot, random, expires, lease_random, policy = request.policy,
         key = lease ? std::string(request.key) : std::string(),
         done = std::move(done)](absl::StatusOr<Decision> d, std::int64_t acquired_at) mutable {
          if (!d.ok()) return done(d.status());
          Reservation reservation;
          reservation.decision = *d;
          // A degraded answer (on_error) holds no record: there is nothing to settle.
          if (d->allowed && !d->degraded) {
            reservation.id = lease_random.empty() ? fmt::format("{:04x}{:016x}", slot, random)
                                                  : LeaseId(key, lease_random, policy, acquired_at);
            reservation.expires = expires;
          }
          done(std::move(reservation));
        });
  }

  void Settle(const SettleRequest& request, DecisionCallback done) {
    const std::string_view id = request.id;
    auto settled = [done = std::move(done)](absl::StatusOr<Decision> d, std::int64_t) mutable {
      done(std::move(d));
    };
    if (const std::size_t dot = id.find('.'); dot != std::string_view::npos) {  // a lease
      std::string key;
      if (!absl::WebSafeBase64Unescape(absl::string_view(id.data(), dot), &key) || key.empty() ||
          key.size() > kMaxKeyBytes || dot + 1 == id.size()) {
        return settled(absl::NotFoundError("unknown lease: not an id this store made"), 0);
      }
      std::string redis_key = RedisKey(StateKind::kConcurrency, key);
      const std::size_t key_at = redis_key.size() - key.size();
      return SubmitReservation(UnitMode::kSettle,
                               PendingItem{std::move(redis_key), key_at, Policy{}, request.actual,
                                           StateKind::kConcurrency},
                               std::string(), std::string(id.substr(dot + 1)), 0, request.now,
                               std::move(settled));
    }
    unsigned slot = 0;
    std::uint64_t random = 0;
    const auto hex = [](std::string_view text, auto& value) {
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
      return error == std::errc() && end == text.data() + text.size();
    };
    if (id.size() != 20 || !hex(id.substr(0, 4), slot) || !hex(id.substr(4), random) ||
        slot >= static_cast<unsigned>(redis::kClusterSlots)) {
      return settled(absl::NotFoundError("unknown reservation: not an id this store made"), 0);
    }
    SubmitReservation(UnitMode::kSettle,
                      PendingItem{RecordKey(static_cast<int>(slot), random), 0, Policy{},
                                  request.actual, StateKind::kGcra},
                      std::string(), std::string(), 0, request.now, std::move(settled));
  }

  // Any thread. Sends a unit on its way: on a cluster to the I/O thread, which routes it
  // by slot; else through the server's breaker to one of its connections.
  void Dispatch(PendingPtr pending, Steady::time_point now) {
    if (options_.cluster) {
      // The slot map belongs to the I/O thread: route there.
      pending->slot = redis::SlotOf(pending->item().redis_key);
      std::lock_guard lock(route_mu_);
      route_queue_.push_back(std::move(pending));
      if (!route_posted_) {
        route_posted_ = true;
        asio::post(io_, [this] { RouteQueued(); });
      }
      return;
    }
    Node& node = *nodes_.front();
    pending->node = &node;
    if (!node.breaker.Allow(now)) return AnswerWhileOpen(*pending);
    Lane* lane = node.PickLane();
    if (lane == nullptr) {
      return Complete(*pending, absl::UnavailableError(LastError()));
    }
    Enqueue(*lane, std::move(pending), /*flush_now=*/false);
  }

  StoreStats LocalStats() const { return local_.Stats(); }

  RedisStats Stats() const {
    RedisStats s;
    s.calls = stats_.calls;
    s.batched_decisions = stats_.batched;
    s.errors = stats_.errors;
    s.timeouts = stats_.timeouts;
    s.degraded = stats_.degraded;
    s.denial_cache_hits = stats_.denial_cache_hits;
    s.noscript_reloads = stats_.noscript;
    s.reconnects = stats_.reconnects;
    s.moved = stats_.moved;
    s.asked = stats_.asked;
    s.retried = stats_.retried;
    s.topology_refreshes = stats_.refreshes;
    s.multi_decisions = stats_.multi;
    s.cross_slot = stats_.cross_slot;
    s.releases = stats_.releases;
    s.release_failures = stats_.release_failures;
    s.nodes = primaries_.load();
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
      std::vector<Node*> targets =
          options_.cluster ? owner_nodes_ : std::vector<Node*>{nodes_.front().get()};
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

 private:
  struct Script {
    std::string body;
    std::string sha;  // from SCRIPT LOAD, written on the I/O thread during handshakes
  };

  struct Counters {
    std::atomic<std::uint64_t> calls{0}, batched{0}, errors{0}, timeouts{0}, degraded{0},
        denial_cache_hits{0}, noscript{0}, reconnects{0}, moved{0}, asked{0}, retried{0},
        refreshes{0}, multi{0}, cross_slot{0}, releases{0}, release_failures{0};
  };

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
    Node* raw_node = node.get();
    for (int i = 0; i < connections; ++i) {
      auto lane = std::make_unique<Lane>(io_, *node);
      Lane* raw = lane.get();
      lane->connection = std::make_unique<redis::Connection>(
          io_, connection,
          redis::Connection::Hooks{
              [this] { return HandshakeCommands(); },
              [this, raw_node](std::size_t index, const redisReply& reply) {
                return CheckHandshake(*raw_node, index, reply);
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

  // I/O thread: the node serving `endpoint`, connected on first use.
  Node& NodeFor(const RedisEndpoint& endpoint) {
    for (auto& node : nodes_) {
      // Seeds have one connection, for discovery; decisions get a node of their own.
      if (node->endpoint == endpoint && !node->seed && !node->retired) return *node;
    }
    Node& node = AddNode(endpoint, HostPort(endpoint.host, endpoint.port), options_.connections);
    StartNode(node);
    return node;
  }

  // The first command is AUTH, or a PING without a password: the connection sends it
  // alone, and its answer tells a server that wants a password before a script goes.
  std::vector<std::string> HandshakeCommands() const {
    std::vector<std::string> commands;
    std::string command;
    if (options_.password.empty()) {
      redis::AppendCommand(command, {"PING"});
    } else if (options_.user.empty()) {
      redis::AppendCommand(command, {"AUTH", options_.password});
    } else {
      redis::AppendCommand(command, {"AUTH", options_.user, options_.password});
    }
    commands.push_back(std::exchange(command, {}));
    if (options_.db != 0) {
      redis::AppendCommand(command, {"SELECT", std::to_string(options_.db)});
      commands.push_back(std::exchange(command, {}));
    }
    for (const Script& script : scripts_) {
      redis::AppendCommand(command, {"SCRIPT", "LOAD", script.body});
      commands.push_back(std::exchange(command, {}));
    }
    return commands;
  }

  absl::Status CheckHandshake(const Node& node, std::size_t index, const redisReply& reply) {
    const std::size_t auth = 1;  // AUTH, or PING
    const std::size_t select = options_.db != 0 ? 1 : 0;
    if (reply.type == REDIS_REPLY_ERROR) {
      const std::string_view text = redis::TextOf(reply);
      if (index == 0 && !options_.password.empty()) {
        return absl::PermissionDeniedError(
            fmt::format("redis at {} refused AUTH: {}", node.describe, text));
      }
      // The PING's NOAUTH; "unauthenticated" is how a server refuses a large request
      // from an unauthenticated client, should one still get that far.
      if (text.starts_with("NOAUTH") || text.find("unauthenticated") != std::string_view::npos) {
        return absl::PermissionDeniedError(fmt::format(
            "redis at {} needs a password: {} (give it in the URL: redis://:PASSWORD@host:port)",
            node.describe, text));
      }
      const char* step = index == 0 ? "PING" : index < auth + select ? "SELECT" : "SCRIPT LOAD";
      return absl::FailedPreconditionError(
          fmt::format("redis at {} refused {}: {}", node.describe, step, text));
    }
    if (index >= auth + select) {
      if (reply.type != REDIS_REPLY_STRING) {
        return absl::InternalError("SCRIPT LOAD did not answer with a SHA");
      }
      scripts_[index - auth - select].sha = std::string(redis::TextOf(reply));
    }
    return absl::OkStatus();
  }

  // I/O thread: see RedisStore::Health.
  absl::Status HealthOnIoThread() {
    if (closed_) return absl::CancelledError("store closed");
    if (!options_.cluster) {
      if (nodes_.front()->PickLane() != nullptr) return absl::OkStatus();
      return absl::UnavailableError(LastError());
    }
    if (owner_nodes_.empty()) {
      return absl::UnavailableError(
          fmt::format("redis cluster {}: no slot map yet ({})", options_.Describe(), LastError()));
    }
    for (Node* node : owner_nodes_) {
      if (node->PickLane() == nullptr) {
        return absl::UnavailableError(
            fmt::format("{} ({})", MessageOf(NotConnected(*node)), LastError()));
      }
    }
    return absl::OkStatus();
  }

  void OnReady(Lane& lane) {
    lane.ready = true;
    // A connection that finished its handshake (AUTH, SCRIPT LOAD) has heard the server
    // answer: decisions go to it at once, not after the breaker's open period.
    lane.node.breaker.Success();
    if (options_.cluster) {
      Node& node = lane.node;
      node.ever_ready = true;
      if (!node.waiting.empty()) {
        std::deque<PendingPtr> waiting;
        waiting.swap(node.waiting);
        Route(waiting);
      }
      if (!topology_known_) StartRefresh();  // a seed is up: ask it for the slot map
      UpdateSettled();
      return;
    }
    std::lock_guard lock(start_mu_);
    ++ready_lanes_;
    start_cv_.notify_all();
  }

  void OnDown(Lane& lane, const absl::Status& status) {
    if (lane.ready.exchange(false)) ++stats_.reconnects;
    // A lost primary may have been replaced: look at the topology again.
    if (options_.cluster &&
        std::find(owner_nodes_.begin(), owner_nodes_.end(), &lane.node) != owner_nodes_.end()) {
      RequestRefresh();
    }
    {
      std::lock_guard lock(start_mu_);
      if (first_error_.ok()) first_error_ = status;
      last_error_ = std::string(MessageOf(status));
      if (!lane.reported_down) {
        lane.reported_down = true;
        ++failed_lanes_;
      }
      start_cv_.notify_all();
    }
    if (options_.cluster) UpdateSettled();
  }

  std::string LastError() {
    std::lock_guard lock(start_mu_);
    return last_error_.empty() ? fmt::format("redis at {} is not connected", options_.Describe())
                               : last_error_;
  }

  // Not a new failure (the breaker's own refusal must not keep it open): answer as
  // on_error says, at memory speed (a group's multi-decision does so for all its items).
  void AnswerWhileOpen(PendingDecision& pending) {
    pending.answered = true;
    if (pending.mode == UnitMode::kSettle) {
      return pending.done(SettleFailed(absl::UnavailableError("redis circuit breaker open")));
    }
    if (pending.mode != UnitMode::kSingle && !pending.reservation()) {
      return pending.unit_done(absl::UnavailableError("redis circuit breaker open"));
    }
    pending.done(Fallback(pending));
  }

  // Any thread. Queues a decision on a connection; the I/O thread sends it (at once when
  // called there with flush_now).
  void Enqueue(Lane& lane, PendingPtr pending, bool flush_now) {
    {
      std::lock_guard lock(lane.mu);
      lane.queued.push_back(std::move(pending));
      if (flush_now || lane.flush_posted) return;
      lane.flush_posted = true;
    }
    asio::post(io_, [this, &lane] { Flush(lane); });
  }

  // ---- Redis Cluster routing (I/O thread) ----

  void RouteQueued() {
    std::deque<PendingPtr> queued;
    {
      std::lock_guard lock(route_mu_);
      route_posted_ = false;
      queued.swap(route_queue_);
    }
    Route(queued);
  }

  // Sends each decision to the primary owning its slot, then flushes the connections
  // that got some.
  template <class Range>
  void Route(Range& pendings) {
    std::vector<Lane*> touched;
    const Steady::time_point now = Steady::now();
    for (auto& pending : pendings) {
      if (!Live(*pending, now)) continue;
      Node* node = owners_[pending->slot];
      if (node == nullptr) {
        RequestRefresh();
        Complete(*pending,
                 absl::UnavailableError(fmt::format("redis cluster {}: no primary serves slot {}",
                                                    options_.Describe(), pending->slot)));
        continue;
      }
      if (!Admit(*node, *pending, now)) continue;
      Lane* lane = node->PickLane();
      if (lane == nullptr) {
        if (!node->ever_ready) {
          Wait(*node, pending);
          continue;
        }
        RequestRefresh();
        Complete(*pending, NotConnected(*node));
        continue;
      }
      Enqueue(*lane, pending, /*flush_now=*/true);
      if (std::find(touched.begin(), touched.end(), lane) == touched.end()) {
        touched.push_back(lane);
      }
    }
    for (Lane* lane : touched) Flush(*lane);
  }

  // Not answered yet, and within its deadline (else answered as timed out).
  bool Live(PendingDecision& pending, Steady::time_point now) {
    if (pending.answered) return false;
    if (now < pending.deadline) return true;
    Complete(pending, TimeoutError());
    return false;
  }

  // Counts one more redirect or retry; past kMaxRedirects the decision is answered.
  bool CountRedirect(PendingDecision& pending) {
    if (pending.answered) return false;
    if (++pending.redirects <= kMaxRedirects) return true;
    Complete(pending, absl::UnavailableError(
                          fmt::format("redis cluster {}: slot {} still redirected after {} tries",
                                      options_.Describe(), pending.slot, kMaxRedirects)));
    return false;
  }

  static absl::Status NotConnected(const Node& node) {
    return absl::UnavailableError(fmt::format("redis at {} is not connected", node.describe));
  }

  // Sends the decision to `node` if the node's breaker lets it (its outcome then feeds
  // that breaker); a retry on the node that already admitted it is not asked again (it
  // may be the breaker's probe). Answers it by on_error when not.
  bool Admit(Node& node, PendingDecision& pending, Steady::time_point now) {
    pending.node = &node;
    if (pending.admitted_by == &node) return true;
    if (!node.breaker.Allow(now)) {
      AnswerWhileOpen(pending);
      return false;
    }
    pending.admitted_by = &node;
    return true;
  }

  // A node that has not connected yet: the decision waits for it, its deadline enforced
  // by the sweep of the node's first connection.
  void Wait(Node& node, const PendingPtr& pending) {
    node.waiting.push_back(pending);
    Lane& first = *node.lanes.front();
    first.deadlines.push_back(pending);
    ArmSweep(first);
  }

  // A redirect or retry: the call did not run, so the decisions go again (bounded).
  void Reroute(std::vector<PendingPtr> chunk) {
    for (auto& pending : chunk) CountRedirect(*pending);
    Route(chunk);
  }

  void RequestRefresh() {
    if (!options_.cluster || closed_ || refresh_in_flight_ || refresh_scheduled_) return;
    const Steady::time_point earliest = last_refresh_ + kRefreshInterval;
    if (Steady::now() >= earliest) return StartRefresh();
    refresh_scheduled_ = true;
    refresh_timer_.expires_at(earliest);
    refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
      refresh_scheduled_ = false;
      if (!ec) StartRefresh();
    });
  }

  // Asks CLUSTER SLOTS of a reachable node: a primary first, else any (the seeds), and
  // a node that refused before only when no other answers.
  void StartRefresh() {
    if (refresh_in_flight_ || closed_) return;
    last_refresh_ = Steady::now();
    Lane* lane = nullptr;
    for (Node* node : owner_nodes_) {
      if ((lane = node->PickLane()) != nullptr) break;
    }
    for (int pass = 0; pass < 2 && lane == nullptr; ++pass) {
      for (std::size_t i = 0; lane == nullptr && i < nodes_.size(); ++i) {
        Node& node = *nodes_[i];
        if (!node.retired && node.refused_topology == (pass == 1)) lane = node.PickLane();
      }
    }
    if (lane == nullptr) return RequestRefresh();  // nobody reachable yet: try again soon
    refresh_in_flight_ = true;
    ++stats_.refreshes;
    std::string command;
    redis::AppendCommand(command, {"CLUSTER", "SLOTS"});
    lane->connection->Send(command, [this, lane](absl::StatusOr<redis::Reply> reply) {
      refresh_in_flight_ = false;
      if (!reply.ok()) return RequestRefresh();
      auto ranges = redis::ParseClusterSlots(**reply, lane->node.endpoint.host);
      if (!ranges.ok()) {
        lane->node.refused_topology = true;
        // Start-up fails only once every seed has refused (one may still be loading).
        const bool all_refused = std::all_of(
            seeds_.begin(), seeds_.end(), [](const Node* seed) { return seed->refused_topology; });
        if (!topology_known_ && all_refused) {
          std::lock_guard lock(start_mu_);
          topology_error_ = absl::FailedPreconditionError(fmt::format(
              "redis at {} did not give the cluster topology ({}); for a single server use "
              "redis://",
              lane->node.describe, MessageOf(ranges.status())));
          last_error_ = std::string(MessageOf(topology_error_));
          start_cv_.notify_all();
        }
        // Asked again (a seed may still be joining its cluster); a store whose Open failed
        // on the error above is closed before this comes round.
        return RequestRefresh();
      }
      lane->node.refused_topology = false;
      ApplyTopology(*ranges);
      // Slots no primary serves (a cluster still being created, or a primary lost with
      // no replica to promote): keep asking, at most once per kRefreshInterval.
      if (std::find(owners_.begin(), owners_.end(), nullptr) != owners_.end()) {
        return RequestRefresh();
      }
      // Until every slot's primary is reachable (a replica is being promoted, say), keep
      // looking, at most once per kRefreshInterval. Primaries just found and still making
      // their first connections are not a reason: if those fail, OnDown asks.
      for (Node* node : owner_nodes_) {
        if (node->Unreachable()) return RequestRefresh();
      }
    });
    // The stall check covers this call too: an answer that never comes (a half-open
    // connection) drops the connection, which fails the call, which asks again.
    ArmSweep(*lane);
  }

  void ApplyTopology(const std::vector<redis::SlotRange>& ranges) {
    std::fill(owners_.begin(), owners_.end(), nullptr);
    owner_nodes_.clear();
    for (const redis::SlotRange& range : ranges) {
      Node& node = NodeFor(range.primary);
      std::fill(owners_.begin() + range.first, owners_.begin() + range.last + 1, &node);
      if (std::find(owner_nodes_.begin(), owner_nodes_.end(), &node) == owner_nodes_.end()) {
        owner_nodes_.push_back(&node);
      }
    }
    primaries_ = owner_nodes_.size();
    // Old primaries (failed over, or removed) stop reconnecting; a later redirect to the
    // same address gets a new node. Seeds stay, for the next CLUSTER SLOTS.
    for (auto& node : nodes_) {
      if (node->seed || node->retired ||
          std::find(owner_nodes_.begin(), owner_nodes_.end(), node.get()) != owner_nodes_.end()) {
        continue;
      }
      node->retired = true;
      for (auto& lane : node->lanes) {
        lane->connection->Stop();
        lane->ready = false;
      }
      std::deque<PendingPtr> waiting;
      waiting.swap(node->waiting);
      Route(waiting);  // to whoever owns their slots now
    }
    {
      std::lock_guard lock(start_mu_);
      topology_known_ = true;
    }
    UpdateSettled();
  }

  // Start-up: the topology is known and every primary's connections have been tried.
  void UpdateSettled() {
    if (!topology_known_ || cluster_settled_) return;
    for (Node* node : owner_nodes_) {
      for (auto& lane : node->lanes) {
        if (!lane->ready && !lane->reported_down) return;
      }
    }
    std::lock_guard lock(start_mu_);
    cluster_settled_ = true;
    start_cv_.notify_all();
  }

  // With batching on, at most this many script calls are out per connection; decisions
  // arriving meanwhile wait in the queue and leave together, in as few calls as possible,
  // when a call returns. Under load that fills the batches; at light load a decision
  // still leaves at once. With batching off (batch=1) calls are only pipelined.
  static constexpr int kCallsOutWhenBatching = 2;

  // I/O thread: sends what queued up since the last flush, batched.
  void Flush(Lane& lane) {
    std::deque<PendingPtr> queued;
    {
      std::lock_guard lock(lane.mu);
      lane.flush_posted = false;
      lane.holding = options_.max_batch > 1 && lane.connection->ready() &&
                     lane.calls_out >= kCallsOutWhenBatching && !lane.queued.empty();
      if (!lane.holding) queued.swap(lane.queued);
    }
    if (lane.holding) return ArmSweep(lane);  // the sweep answers any held too long
    const Steady::time_point now = Steady::now();
    std::vector<PendingPtr> live;
    live.reserve(queued.size());
    for (auto& pending : queued) {
      if (pending->answered) continue;
      if (!lane.connection->ready()) {
        Complete(*pending,
                 options_.cluster ? NotConnected(lane.node) : absl::UnavailableError(LastError()));
      } else if (now >= pending->deadline) {
        Complete(*pending, TimeoutError());
      } else {
        lane.deadlines.push_back(pending);
        live.push_back(std::move(pending));
      }
    }
    ArmSweep(lane);
    // Reservations go by a script of their own; a cluster runs a script only on keys of
    // one slot: batch within a slot.
    const bool cluster = options_.cluster;
    std::stable_sort(live.begin(), live.end(), [cluster](const PendingPtr& a, const PendingPtr& b) {
      if (a->reservation() != b->reservation()) return b->reservation();
      return cluster && a->slot < b->slot;
    });
    const std::size_t batch = static_cast<std::size_t>(options_.max_batch);
    for (std::size_t i = 0; i < live.size();) {
      std::size_t end = std::min(live.size(), i + batch);
      std::size_t same = i + 1;
      while (same < end && live[same]->reservation() == live[i]->reservation() &&
             (!cluster ||
              (!live[i]->alone && !live[same]->alone && live[same]->slot == live[i]->slot))) {
        ++same;
      }
      end = same;
      std::vector<PendingPtr> chunk(std::make_move_iterator(live.begin() + i),
                                    std::make_move_iterator(live.begin() + end));
      Send(lane, std::move(chunk), /*as_eval=*/false, /*asking=*/false);
      i = end;
    }
  }

  // The distinct policies of a chunk's items (a settle's record holds its own: it names
  // none), and each item's policy number among them (1-based; 0 for a settle).
  static std::vector<const PendingItem*> DistinctPolicies(const std::vector<PendingPtr>& chunk,
                                                          std::vector<std::size_t>& policy_of) {
    std::vector<const PendingItem*> policies;
    for (const auto& p : chunk) {
      for (const PendingItem& item : p->items) {
        if (p->mode == UnitMode::kSettle) {
          policy_of.push_back(0);
          continue;
        }
        std::size_t j = 0;
        while (j < policies.size() &&
               !(policies[j]->kind == item.kind && policies[j]->policy == item.policy)) {
          ++j;
        }
        if (j == policies.size()) policies.push_back(&item);
        policy_of.push_back(j + 1);
      }
    }
    return policies;
  }

  // One script call for `chunk`: the algorithm's script for a lone decision, the batch
  // script for several. `as_eval` sends the body (after NOSCRIPT: Redis restarted or
  // flushed its scripts); EVAL caches it again for the next EVALSHA. `asking` prefixes
  // ASKING (the slot is being imported by this node: an ASK redirect).
  void Send(Lane& lane, std::vector<PendingPtr> chunk, bool as_eval, bool asking) {
    const bool reservations = chunk[0]->reservation();
    const bool single = chunk.size() == 1 && chunk[0]->single();
    const ScriptId id = reservations ? kScriptReservation
                        : single     ? SingleScriptFor(chunk[0]->item().kind)
                                     : kScriptBatch;
    // lua/batch.lua lists a group (5 arguments, checked one by one: with its deferred
    // writes, Redis spent more on a listed group of one item than on the item) unless it
    // is the common kind, all or nothing without shadows: such a group's items after the
    // first join it by a '+' on their policy number, and a group of one is simply the
    // item's own decision (docs/multi.md: a multi-decision of one item is the single one;
    // a shadow changes only what the caller makes of it).
    const auto joined = [](const PendingDecision& p) {
      return p.mode == UnitMode::kAll &&
             (p.items.size() == 1 ||
              std::none_of(p.items.begin(), p.items.end(),
                           [](const PendingItem& item) { return item.shadow; }));
    };
    const auto grouped = [&](const PendingDecision& p) {
      return p.mode != UnitMode::kSingle && !joined(p);
    };
    std::size_t keys = 0, groups = 0;
    for (const auto& p : chunk) {
      keys += p->items.size() + (p->mode == UnitMode::kReserve && p->lease.empty());
      groups += grouped(*p);
    }
    // Decimal arguments, kept alive until the command is formatted (the vector is sized
    // up front, so the views into it stay valid).
    std::vector<std::string> numbers;
    numbers.reserve(2 + keys * 7 + groups * 6);
    const auto number = [&numbers](std::string text) -> std::string_view {
      return numbers.emplace_back(std::move(text));
    };
    const auto now_arg = [](const PendingDecision& p) {
      return p.now_us ? std::to_string(*p.now_us) : std::string();
    };
    std::vector<std::string_view> args;
    args.reserve(8 + keys * 8 + groups * 5);
    args.push_back(as_eval ? "EVAL" : "EVALSHA");
    args.push_back(as_eval ? scripts_[id].body : scripts_[id].sha);
    args.push_back(number(std::to_string(keys)));
    for (const auto& p : chunk) {
      for (const PendingItem& item : p->items) args.push_back(item.redis_key);
      if (p->mode == UnitMode::kReserve && p->lease.empty()) args.push_back(p->record_key);
    }
    // The distinct policies of a batch or of reservations, sent once: p, then 4 values each.
    const auto append_policies = [&](const std::vector<const PendingItem*>& policies) {
      args.push_back(number(std::to_string(policies.size())));
      for (const PendingItem* item : policies) {
        args.push_back(core::KeyTag(item->kind));
        args.push_back(number(std::to_string(item->policy.limit)));
        args.push_back(number(std::to_string(item->policy.period.count())));
        args.push_back(number(std::to_string(item->policy.capacity())));
      }
    };
    if (reservations) {  // lua/reservation.lua: the distinct policies once, then each operation
      std::vector<std::size_t> policy_of;
      append_policies(DistinctPolicies(chunk, policy_of));
      args.push_back(number(std::to_string(chunk.size())));
      std::size_t k = 0;
      for (const auto& p : chunk) {
        const PendingItem& item = p->item();
        // An acquire or release at the server clock (and a release at 0) has a short form
        // (lua/reservation.lua: 'a', 'l'): each argument costs Redis ~1,000 instructions.
        if (p->mode == UnitMode::kReserve && !p->lease.empty()) {
          args.push_back(p->now_us ? "A" : "a");
          args.push_back(number(std::to_string(policy_of[k++])));
          if (p->now_us) args.push_back(number(now_arg(*p)));
          args.push_back(p->lease);
        } else if (p->mode == UnitMode::kSettle && !p->lease.empty()) {
          ++k;
          if (p->now_us || item.cost != 0) {
            args.push_back("L");
            args.push_back(number(now_arg(*p)));
            args.push_back(number(std::to_string(item.cost)));
          } else {
            args.push_back("l");
          }
          args.push_back(p->lease);
        } else if (p->mode == UnitMode::kReserve) {
          args.push_back("r");
          args.push_back(number(std::to_string(policy_of[k++])));
          args.push_back(number(now_arg(*p)));
          args.push_back(number(std::to_string(item.cost)));
          args.push_back(number(std::to_string(p->hold_us)));
        } else {
          ++k;
          args.push_back("s");
          args.push_back(number(now_arg(*p)));
          args.push_back(number(std::to_string(item.cost)));
        }
      }
    } else if (single) {  // lua/single.lua: kind, now, limit, period, burst, cost
      const PendingDecision& p = *chunk[0];
      const PendingItem& item = p.item();
      args.push_back(core::KeyTag(item.kind));
      args.push_back(number(now_arg(p)));
      args.push_back(number(std::to_string(item.policy.limit)));
      args.push_back(number(std::to_string(item.policy.period.count())));
      args.push_back(number(std::to_string(item.policy.capacity())));
      args.push_back(number(std::to_string(item.cost)));
    } else {  // lua/batch.lua: the distinct policies once, the groups, then each item
      std::vector<std::size_t> policy_of;
      append_policies(DistinctPolicies(chunk, policy_of));
      args.push_back(number(std::to_string(groups)));
      std::size_t first = 1;
      for (const auto& p : chunk) {
        if (grouped(*p)) {
          unsigned mask = 0;
          for (std::size_t i = 0; i < p->items.size(); ++i) mask |= p->items[i].shadow << i;
          args.push_back(number(std::to_string(first)));
          args.push_back(number(std::to_string(p->items.size())));
          args.push_back(p->mode == UnitMode::kAll   ? "all"
                         : p->mode == UnitMode::kDry ? "dry"
                                                     : "release");
          args.push_back(number(std::to_string(mask)));
          args.push_back(p->mode == UnitMode::kRelease ? number(std::to_string(p->release_at))
                                                       : std::string_view());
        }
        first += p->items.size();
      }
      std::size_t k = 0;
      for (const auto& p : chunk) {
        const std::string_view now = number(now_arg(*p));
        const bool joins = joined(*p);
        for (std::size_t i = 0; i < p->items.size(); ++i) {
          const std::string policy = std::to_string(policy_of[k++]);
          args.push_back(number(joins && i > 0 ? "+" + policy : policy));
          args.push_back(now);
          args.push_back(number(std::to_string(p->items[i].cost)));
        }
      }
    }
    std::string command;
    if (asking) redis::AppendCommand(command, {"ASKING"});
    const std::size_t asking_bytes = command.size();
    redis::AppendCommand(command, args);
    ++stats_.calls;
    if (!single) stats_.batched += keys;
    ++lane.calls_out;
    if (asking) {
      // Sent in the same write, right before the script: ASKING covers only the next
      // command on its connection. Its +OK needs no handling; the script's reply tells.
      lane.connection->Send(std::string_view(command).substr(0, asking_bytes),
                            [](absl::StatusOr<redis::Reply>) {});
    }
    lane.connection->Send(std::string_view(command).substr(asking_bytes),
                          [this, &lane, chunk = std::move(chunk), as_eval,
                           asking](absl::StatusOr<redis::Reply> reply) mutable {
                            --lane.calls_out;
                            OnReply(lane, std::move(chunk), as_eval, asking, std::move(reply));
                            if (lane.holding) Flush(lane);
                          });
  }

  void OnReply(Lane& lane, std::vector<PendingPtr> chunk, bool as_eval, bool asking,
               absl::StatusOr<redis::Reply> reply) {
    if (!reply.ok()) {
      for (auto& p : chunk) Complete(*p, reply.status());
      return;
    }
    const redisReply& r = **reply;
    if (r.type == REDIS_REPLY_ERROR) {
      const std::string_view text = redis::TextOf(r);
      if (text.starts_with("NOSCRIPT") && !as_eval) {
        ++stats_.noscript;
        return Send(lane, std::move(chunk), /*as_eval=*/true, asking);
      }
      // Redirects and refusals of a cluster: the script did not run, so sending it again
      // cannot count a decision twice.
      if (options_.cluster) {
        if (auto redirect = redis::ParseRedirect(text)) {
          // "MOVED 3999 :6381": an unknown endpoint means the host that answered.
          if (redirect->target.host.empty()) redirect->target.host = lane.node.endpoint.host;
          Node& target = NodeFor(redirect->target);
          if (redirect->kind == redis::Redirect::Kind::kMoved) {
            ++stats_.moved;
            owners_[redirect->slot] = &target;
            RequestRefresh();  // more slots have probably moved
            return Reroute(std::move(chunk));
          }
          ++stats_.asked;
          return Ask(target, std::move(chunk));
        }
        if (text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN")) {
          ++stats_.retried;
          // TRYAGAIN: some of a batch's keys have migrated and some not. One key at a
          // time, each follows its own ASK.
          if (chunk.size() > 1) {
            for (auto& p : chunk) p->alone = true;
          }
          if (text.starts_with("CLUSTERDOWN")) RequestRefresh();
          auto timer = std::make_shared<asio::steady_timer>(io_, kRetryDelay);
          timer->async_wait(
              [this, timer, chunk = std::move(chunk)](const boost::system::error_code& ec) mutable {
                if (!ec) Reroute(std::move(chunk));
              });
          return;
        }
      }
      const absl::Status error =
          absl::InternalError(fmt::format("redis at {}: {}", lane.node.describe, text));
      for (auto& p : chunk) Complete(*p, error);
      return;
    }
    if (chunk[0]->reservation()) {
      auto decoded = redis::DecodeReservations(r, chunk.size());
      if (!decoded.ok()) {
        const absl::Status error = absl::InternalError(
            fmt::format("redis at {} {}", lane.node.describe, MessageOf(decoded.status())));
        for (auto& p : chunk) Complete(*p, error);
        return;
      }
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        chunk[i]->acquired_at = (*decoded)[i].acquired_at;
        Complete(*chunk[i], std::move((*decoded)[i].decision));
      }
      return;
    }
    const bool single = chunk.size() == 1 && chunk[0]->single();
    std::vector<std::int64_t> limits;
    for (const auto& p : chunk) {
      for (const PendingItem& item : p->items) limits.push_back(item.policy.limit);
    }
    auto decoded = redis::DecodeDecisions(r, limits, /*with_clock=*/!single);
    if (!decoded.ok()) {
      const absl::Status error = absl::InternalError(
          fmt::format("redis at {} {}", lane.node.describe, MessageOf(decoded.status())));
      for (auto& p : chunk) Complete(*p, error);
      return;
    }
    const auto failed = [&](const absl::Status& status) {
      return absl::InternalError(
          fmt::format("redis at {} {}", lane.node.describe, MessageOf(status)));
    };
    std::size_t k = 0;
    for (auto& p : chunk) {
      if (p->mode == UnitMode::kSingle) {
        absl::StatusOr<Decision>& d = decoded->decisions[k++];
        Complete(*p, d.ok() ? std::move(d) : failed(d.status()));
        continue;
      }
      UnitResult result;
      result.clock_us = decoded->clock_us;
      absl::Status status;
      for (std::size_t i = 0; i < p->items.size(); ++i) {
        absl::StatusOr<Decision>& d = decoded->decisions[k++];
        if (!d.ok()) {
          status = failed(d.status());
        } else {
          result.items.push_back(*d);
        }
      }
      if (status.ok()) {
        CompleteUnit(*p, std::move(result));
      } else {
        CompleteUnit(*p, status);
      }
    }
  }

  // ASK: this one call goes to the importing node, after ASKING; the slot map stays.
  void Ask(Node& target, std::vector<PendingPtr> chunk) {
    // As in Route: within the deadline, and the target's breaker decides (and hears how
    // it went: the call runs there).
    const Steady::time_point now = Steady::now();
    for (auto& pending : chunk) {
      if (CountRedirect(*pending) && Live(*pending, now)) Admit(target, *pending, now);
    }
    std::erase_if(chunk, [](const PendingPtr& p) { return p->answered; });
    if (chunk.empty()) return;
    Lane* lane = target.PickLane();
    if (lane == nullptr) {
      for (auto& p : chunk) {
        if (!target.ever_ready) {
          // The importing node is new to us: wait for its connection; the decision then
          // goes to the slot's owner again, which sends it here with ASK once more.
          Wait(target, p);
        } else {
          Complete(*p, NotConnected(target));
        }
      }
      return;
    }
    for (auto& p : chunk) lane->deadlines.push_back(p);
    ArmSweep(*lane);
    Send(*lane, std::move(chunk), /*as_eval=*/false, /*asking=*/true);
  }

  absl::Status TimeoutError() const {
    return absl::DeadlineExceededError(fmt::format("redis at {} did not answer within {} µs",
                                                   options_.Describe(), options_.timeout.count()));
  }

  void ArmSweep(Lane& lane) {
    if (lane.sweeping ||
        (lane.deadlines.empty() && !lane.holding && lane.connection->in_flight() == 0)) {
      return;
    }
    lane.sweeping = true;
    // A tenth of the timeout (1-10 ms): a timed-out decision is answered at most that
    // much late.
    const auto tick = std::clamp<std::chrono::microseconds>(
        options_.timeout / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(10));
    lane.sweep.expires_after(tick);
    lane.sweep.async_wait([this, &lane](const boost::system::error_code& ec) {
      lane.sweeping = false;
      if (ec) return;
      const Steady::time_point now = Steady::now();
      while (!lane.deadlines.empty() &&
             (lane.deadlines.front()->answered || lane.deadlines.front()->deadline <= now)) {
        // Most were answered already: the error (a formatted message) only for the rest.
        if (!lane.deadlines.front()->answered) Complete(*lane.deadlines.front(), TimeoutError());
        lane.deadlines.pop_front();
      }
      // A connection whose oldest command has waited this long is taken for dead (a
      // half-open TCP connection raises no error for hours) and replaced.
      const auto stall_limit =
          std::max<Steady::duration>(std::chrono::seconds(1), options_.timeout * 20);
      if (lane.connection->OldestWait(now) > stall_limit) {
        lane.connection->Abort(absl::DeadlineExceededError(fmt::format(
            "redis at {} answered nothing for {} ms; reconnecting", lane.node.describe,
            std::chrono::duration_cast<std::chrono::milliseconds>(stall_limit).count())));
      }
      if (lane.holding) {
        std::vector<PendingPtr> expired;
        {
          std::lock_guard lock(lane.mu);
          while (!lane.queued.empty() && lane.queued.front()->deadline <= now) {
            expired.push_back(std::move(lane.queued.front()));
            lane.queued.pop_front();
          }
        }
        for (auto& pending : expired) Complete(*pending, TimeoutError());
      }
      ArmSweep(lane);
    });
  }

  // Answers a decision once: Redis's answer, or on_error's.
  void Complete(PendingDecision& p, absl::StatusOr<Decision> result) {
    if (p.mode != UnitMode::kSingle && !p.reservation()) {
      return CompleteUnit(p, result.status());  // an error
    }
    if (p.answered) return;
    p.answered = true;
    const Steady::time_point now = Steady::now();
    // NotFound, InvalidArgument: Redis answered a settle, knowing no such reservation, or
    // a lease settled at a cost (refused, still held).
    if (result.ok() || absl::IsNotFound(result.status()) ||
        (p.mode == UnitMode::kSettle && absl::IsInvalidArgument(result.status()))) {
      if (p.node != nullptr) p.node->breaker.Success();
      if (result.ok() && p.mode != UnitMode::kSettle) RememberDenial(p, p.item(), *result, now);
      p.done(std::move(result));
      return;
    }
    if (absl::IsCancelled(result.status())) {
      p.done(result.status());
      return;
    }
    CountFailure(p, result.status(), now);
    if (p.mode == UnitMode::kSettle) return p.done(SettleFailed(result.status()));
    p.done(Fallback(p));
  }

  // A settle is not decided by on_error: the key would be charged twice or not at all.
  static absl::Status SettleFailed(const absl::Status& status) {
    return absl::UnavailableError(fmt::format(
        "the settle's outcome is unknown ({}): if it did not run, the reservation stays "
        "charged at its estimate until its hold ends; settling again is safe (a settled "
        "reservation is not found)",
        MessageOf(status)));
  }

  // A group's answer, or its failure (answered by on_error for the whole multi-decision,
  // which only its caller can do).
  void CompleteUnit(PendingDecision& p, absl::StatusOr<UnitResult> result) {
    if (p.answered) return;
    p.answered = true;
    const Steady::time_point now = Steady::now();
    if (result.ok()) {
      if (p.node != nullptr) p.node->breaker.Success();
      for (std::size_t i = 0; i < p.items.size(); ++i) {
        RememberDenial(p, p.items[i], result->items[i], now);
      }
    } else if (!absl::IsCancelled(result.status())) {
      CountFailure(p, result.status(), now);
    }
    p.unit_done(std::move(result));
  }

  // The denial cache learns denials Redis gave at its own clock, long enough to matter;
  // never a concurrency limit's, whose retry_after is only an upper bound (a release
  // frees a lease sooner, and a cached denial would then refuse what is admitted).
  void RememberDenial(const PendingDecision& p, const PendingItem& item, const Decision& d,
                      Steady::time_point now) {
    if (!d.allowed && !p.now_us && options_.denial_cache_min.count() > 0 &&
        d.retry_after >= options_.denial_cache_min &&
        item.policy.algorithm != Algorithm::kConcurrency) {
      denials_.Insert(item.redis_key, item.policy, item.cost, d, now);
    }
  }

  void CountFailure(PendingDecision& p, const absl::Status& status, Steady::time_point now) {
    ++stats_.errors;
    if (absl::IsDeadlineExceeded(status)) ++stats_.timeouts;
    if (p.node != nullptr) p.node->breaker.Failure(now);
  }

  // What on_error answers for one item when the store cannot (fail_open, fail_closed).
  Decision OnErrorAnswer(const Policy& policy, std::int64_t cost) const {
    Decision d;
    d.limit = policy.limit;
    d.degraded = true;
    if (options_.on_error == OnError::kFailOpen) {
      d.allowed = true;
      d.remaining = std::max<std::int64_t>(0, policy.capacity() - cost);
    } else {
      // A hint, not a promise: come back after the breaker's open period.
      d.retry_after = std::min<std::chrono::microseconds>(policy.period, options_.breaker_open);
      d.reset_after = d.retry_after;
    }
    return d;
  }

  Decision Fallback(const PendingDecision& p) {
    ++stats_.degraded;
    const PendingItem& item = p.item();
    if (options_.on_error != OnError::kLocal) return OnErrorAnswer(item.policy, item.cost);
    DecideRequest local{std::string_view(item.redis_key).substr(item.key_at), item.policy,
                        item.cost, std::nullopt};
    if (p.now_us) local.now = TimePoint(std::chrono::microseconds(*p.now_us));
    Decision d;
    if (absl::StatusOr<Decision> decided = local_.Decide(local); decided.ok()) {
      d = *decided;
    } else {
      d.limit = item.policy.limit;
    }
    d.degraded = true;
    return d;
  }

  // ---- multi-decisions (docs/multi.md) ----

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

 public:
  void SubmitAll(const MultiRequest& request, MultiCallback done) {
    auto m = std::make_shared<MultiState>();
    const std::size_t n = request.items.size();
    std::size_t name_bytes = 0;
    for (const CheckItem& item : request.items) name_bytes += item.name.size();
    // The items' views point into these: reserved up front, nothing is ever moved.
    m->names.reserve(name_bytes);
    m->redis_keys.reserve(n);
    m->items.reserve(n);
    for (const CheckItem& item : request.items) {
      const std::string& redis_key =
          m->redis_keys.emplace_back(RedisKey(core::KindOf(item.policy), item.key));
      CheckItem& copy = m->items.emplace_back(item);
      // The caller's key is the end of the Redis key (<prefix><tag>:<key>).
      copy.key = std::string_view(redis_key).substr(redis_key.size() - item.key.size());
      copy.name = std::string_view(m->names.data() + m->names.size(), item.name.size());
      m->names.append(item.name);
    }
    if (request.now) m->now_us = request.now->time_since_epoch().count();
    const Steady::time_point now = Steady::now();
    m->deadline = now + options_.timeout;
    m->done = std::move(done);
    m->decisions.resize(n);
    ++stats_.multi;
    if (!request.now && options_.denial_cache_min.count() > 0 && AnswerFromDenials(*m, now)) {
      return;
    }
    if (!options_.cluster) {
      Indexes& all = m->slots.emplace_back(n);
      for (std::size_t i = 0; i < n; ++i) all[i] = i;
    } else {
      std::map<int, Indexes> by_slot;
      for (std::size_t i = 0; i < n; ++i) by_slot[redis::SlotOf(m->redis_keys[i])].push_back(i);
      for (auto& [slot, items] : by_slot) m->slots.push_back(std::move(items));
      if (m->slots.size() > 1) ++stats_.cross_slot;
    }
    ReserveNext(std::move(m));
  }

 private:
  // A denial cached for an enforced item denies the whole request without a round trip
  // (docs/multi.md, "Failures"); the items not asked are reported unknown.
  bool AnswerFromDenials(MultiState& m, Steady::time_point now) {
    MultiDecision answer;
    bool hit = false;
    for (std::size_t i = 0; i < m.items.size(); ++i) {
      const CheckItem& item = m.items[i];
      std::optional<Decision> cached;
      if (!item.shadow && item.cost > 0) {
        cached = denials_.Lookup(m.redis_keys[i], item.policy, item.cost, now);
      }
      if (cached) {
        answer.items.push_back(*cached);
        hit = true;
      } else {
        answer.items.push_back(core::NotConsulted(item));
        answer.unknown.push_back(i);
      }
    }
    if (!hit) return false;
    ++stats_.denial_cache_hits;
    answer.from_denial_cache = true;
    core::Summarize(m.items, answer);
    m.done(std::move(answer));
    return true;
  }

  PendingPtr MakeUnit(const MultiState& m, const Indexes& indexes, UnitMode mode,
                      Steady::time_point deadline) {
    auto unit = std::make_shared<PendingDecision>();
    for (std::size_t i : indexes) {
      const CheckItem& item = m.items[i];
      const std::string& redis_key = m.redis_keys[i];
      unit->items.push_back(PendingItem{redis_key, redis_key.size() - item.key.size(), item.policy,
                                        item.cost, core::KindOf(item.policy), item.shadow});
    }
    unit->mode = mode;
    unit->now_us = m.now_us;
    unit->deadline = deadline;
    return unit;
  }

  // Decides (and consumes, if they all allow) the items of the next slot, then the next;
  // one slot (always, standalone) is the whole multi-decision in one call.
  void ReserveNext(MultiPtr m) {
    if (m->next == m->slots.size()) return Finish(*m, /*allowed=*/true);
    auto unit = MakeUnit(*m, m->slots[m->next], UnitMode::kAll, m->deadline);
    unit->whole = m->slots.size() == 1;
    unit->unit_done = [this, m](absl::StatusOr<UnitResult> result) {
      if (!result.ok()) return Abort(m, result.status());
      const Indexes& indexes = m->slots[m->next];
      bool allowed = true;  // core::MultiAllows over this slot's items
      for (std::size_t k = 0; k < indexes.size(); ++k) {
        m->decisions[indexes[k]] = result->items[k];
        allowed = allowed && core::ItemAllows(m->items[indexes[k]], result->items[k]);
      }
      m->reserved_at.push_back(m->now_us.value_or(result->clock_us));
      if (allowed) {
        ++m->next;
        return ReserveNext(m);
      }
      Unwind(m);  // this slot denied and consumed nothing
    };
    Dispatch(std::move(unit), Steady::now());
  }

  // A slot denied: the later slots are asked what they would say (nothing consumed), the
  // earlier ones give their reservations back; each answers its items' peeks.
  void Unwind(MultiPtr m) {
    std::vector<PendingPtr> units;
    for (std::size_t s = m->next + 1; s < m->slots.size(); ++s) {
      units.push_back(MakeUnit(*m, m->slots[s], UnitMode::kDry, m->deadline));
    }
    for (PendingPtr& release : Releases(*m)) units.push_back(std::move(release));
    m->outstanding = static_cast<int>(units.size());
    if (units.empty()) return Finish(*m, /*allowed=*/false);
    for (PendingPtr& unit : units) {
      Indexes indexes;
      for (const PendingItem& item : unit->items) indexes.push_back(IndexOf(*m, item));
      unit->unit_done = [this, m, indexes](absl::StatusOr<UnitResult> result) {
        for (std::size_t k = 0; k < indexes.size(); ++k) {
          if (result.ok()) {
            m->decisions[indexes[k]] = result->items[k];
          } else {
            m->unknown.push_back(indexes[k]);
            m->decisions[indexes[k]] = core::NotConsulted(m->items[indexes[k]]);
            m->degraded = true;
          }
        }
        if (--m->outstanding == 0) Finish(*m, /*allowed=*/false);
      };
      Dispatch(std::move(unit), Steady::now());
    }
  }

  // Release calls for what the reserved slots consumed: items that allowed with a cost.
  // They get a deadline of their own: a release must not be dropped for the request's.
  std::vector<PendingPtr> Releases(const MultiState& m) {
    std::vector<PendingPtr> units;
    for (std::size_t s = 0; s < m.next; ++s) {
      Indexes consumed;
      for (std::size_t i : m.slots[s]) {
        if (m.decisions[i].allowed && m.items[i].cost > 0) consumed.push_back(i);
      }
      if (consumed.empty()) continue;
      auto unit = MakeUnit(m, consumed, UnitMode::kRelease, Steady::now() + options_.timeout);
      unit->release_at = m.reserved_at[s];
      ++stats_.releases;
      units.push_back(std::move(unit));
    }
    return units;
  }

  static std::size_t IndexOf(const MultiState& m, const PendingItem& item) {
    for (std::size_t i = 0; i < m.redis_keys.size(); ++i) {
      if (m.redis_keys[i] == item.redis_key) return i;
    }
    return 0;  // unreachable: every unit's item comes from m
  }

  void Finish(MultiState& m, bool allowed) {
    MultiDecision answer;
    answer.allowed = allowed;
    answer.items = std::move(m.decisions);
    answer.unknown = std::move(m.unknown);
    std::sort(answer.unknown.begin(), answer.unknown.end());
    answer.degraded = m.degraded;
    core::Summarize(m.items, answer);
    m.done(std::move(answer));
  }

  // A call failed: what was reserved goes back (its answer is not awaited), and on_error
  // answers for every item, as one multi-decision.
  void Abort(MultiPtr m, const absl::Status& status) {
    for (PendingPtr& unit : Releases(*m)) {
      unit->unit_done = [this](absl::StatusOr<UnitResult> result) {
        if (!result.ok()) ++stats_.release_failures;
      };
      Dispatch(std::move(unit), Steady::now());
    }
    if (absl::IsCancelled(status)) return m->done(status);
    ++stats_.degraded;
    MultiDecision answer;
    if (options_.on_error == OnError::kLocal) {
      MultiRequest local{m->items, std::nullopt};
      if (m->now_us) local.now = TimePoint(std::chrono::microseconds(*m->now_us));
      if (auto decided = local_.DecideAll(local); decided.ok()) answer = *std::move(decided);
    }
    if (answer.items.empty()) {  // fail_open, fail_closed
      for (const CheckItem& item : m->items)
        answer.items.push_back(OnErrorAnswer(item.policy, item.cost));
      answer.allowed = core::MultiAllows(m->items, answer.items);
      core::Summarize(m->items, answer);
    }
    answer.degraded = true;
    for (Decision& d : answer.items) d.degraded = true;
    m->done(std::move(answer));
  }

  RedisStoreOptions options_;
  std::unique_ptr<asio::ssl::context> tls_;  // null without TLS
  std::atomic<bool> closed_{false};
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::array<Script, kScriptCount> scripts_;
  std::mutex random_mu_;
  absl::BitGen random_;  // reservation ids: unpredictable, so one client cannot settle another's
  // Standalone: one node, fixed. Cluster: grows on the I/O thread (a new primary); other
  // threads look only under nodes_mu_ (Stats).
  mutable std::mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_;
  redis::DenialCache denials_;
  MemoryStore local_;
  Counters stats_;

  // Cluster. Decisions wait in route_queue_ for the I/O thread, which owns the rest.
  std::mutex route_mu_;
  std::deque<PendingPtr> route_queue_;
  bool route_posted_ = false;
  std::vector<Node*> seeds_;
  asio::steady_timer refresh_timer_;
  Steady::time_point last_refresh_{};
  bool refresh_in_flight_ = false;
  bool refresh_scheduled_ = false;
  std::vector<Node*> owners_;       // slot -> primary (nullptr: no one serves it)
  std::vector<Node*> owner_nodes_;  // the distinct primaries
  std::atomic<std::size_t> primaries_{0};

  // Start-up, under start_mu_.
  std::mutex start_mu_;
  std::condition_variable start_cv_;
  std::size_t ready_lanes_ = 0;
  std::size_t failed_lanes_ = 0;
  bool topology_known_ = false;
  bool cluster_settled_ = false;
  absl::Status topology_error_;
  absl::Status first_error_;
  std::string last_error_;
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  std::unique_ptr<asio::ssl::context> tls;
  if (options.tls) {
    auto context = MakeTlsContext(options);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(tls));
  if (absl::Status status = impl->Start(); !status.ok()) return status;
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisStore::~RedisStore() = default;

void RedisStore::DecideAsyncValidated(const DecideRequest& request, DecisionCallback done) {
  impl_->Submit(request, std::move(done));
}

absl::StatusOr<Decision> RedisStore::DecideValidated(const DecideRequest& request) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<absl::StatusOr<Decision>> result;
  };
  auto waiter = std::make_shared<Waiter>();
  impl_->Submit(request, [waiter](absl::StatusOr<Decision> result) {
    std::lock_guard lock(waiter->mu);
    waiter->result = std::move(result);
    waiter->cv.notify_one();
  });
  std::unique_lock lock(waiter->mu);
  waiter->cv.wait(lock, [&] { return waiter->result.has_value(); });
  return *std::move(waiter->result);
}

void RedisStore::ReserveAsyncValidated(const ReserveRequest& request, ReservationCallback done) {
  impl_->Reserve(request, std::move(done));
}

void RedisStore::SettleAsyncValidated(const SettleRequest& request, DecisionCallback done) {
  impl_->Settle(request, std::move(done));
}

absl::StatusOr<Reservation> RedisStore::ReserveValidated(const ReserveRequest& request) {
  std::promise<absl::StatusOr<Reservation>> answer;
  auto result = answer.get_future();
  impl_->Reserve(request,
                 [&answer](absl::StatusOr<Reservation> r) { answer.set_value(std::move(r)); });
  return result.get();
}

absl::StatusOr<Decision> RedisStore::SettleValidated(const SettleRequest& request) {
  std::promise<absl::StatusOr<Decision>> answer;
  auto result = answer.get_future();
  impl_->Settle(request, [&answer](absl::StatusOr<Decision> d) { answer.set_value(std::move(d)); });
  return result.get();
}

StoreStats RedisStore::Stats() const { return impl_->LocalStats(); }
std::string RedisStore::Describe() const { return impl_->options().Describe(); }
void RedisStore::Close() { impl_->Close(); }
RedisStats RedisStore::redis_stats() const { return impl_->Stats(); }

void RedisStore::DecideAllAsyncValidated(const MultiRequest& request, MultiCallback done) {
  impl_->SubmitAll(request, std::move(done));
}

absl::StatusOr<MultiDecision> RedisStore::DecideAllValidated(const MultiRequest& request) {
  std::promise<absl::StatusOr<MultiDecision>> answer;
  auto result = answer.get_future();
  impl_->SubmitAll(request, [&answer](absl::StatusOr<MultiDecision> decision) {
    answer.set_value(std::move(decision));
  });
  return result.get();
}
const RedisStoreOptions& RedisStore::options() const { return impl_->options(); }
bool RedisStore::Ping() { return impl_->Ping(); }
absl::Status RedisStore::Health() { return impl_->Health(); }

}  // namespace floodgate
