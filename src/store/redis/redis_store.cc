#include <absl/container/flat_hash_map.h>
#include <absl/status/status.h>
#include <floodgate/memory_store.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "core/state_kind.h"
#include "store/redis/breaker.h"
#include "store/redis/connection.h"
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
  kScriptBatch,
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
  }
  return kScriptGcra;
}

// lua/ assembled as described in lua_sources.h: one script per algorithm, one batch.
std::string AssembleScript(ScriptId id) {
  namespace l = redis::lua;
  std::string body(l::k_common);
  switch (id) {
    case kScriptGcra:
      return body.append(l::k_gcra).append(l::k_single);
    case kScriptTokenBucket:
      return body.append(l::k_token_bucket).append(l::k_single);
    case kScriptSlidingLog:
      return body.append(l::k_sliding_log).append(l::k_single);
    case kScriptSlidingWindow:
      return body.append(l::k_sliding_window).append(l::k_single);
    case kScriptFixedWindow:
      return body.append(l::k_fixed_window).append(l::k_single);
    case kScriptBatch:
    case kScriptCount:
      break;
  }
  return body.append(l::k_gcra)
      .append(l::k_token_bucket)
      .append(l::k_sliding_log)
      .append(l::k_sliding_window)
      .append(l::k_fixed_window)
      .append(l::k_batch);
}

// One decision on its way through Redis. Touched only on the I/O thread once queued.
struct PendingDecision {
  std::string redis_key;  // <prefix><tag>:<key>
  std::size_t key_at;     // where the caller's key starts in redis_key (for on_error=local)
  Policy policy;
  std::int64_t cost;
  std::optional<std::int64_t> now_us;
  StateKind kind;
  Steady::time_point deadline;
  DecisionCallback done;
  bool answered = false;
};
using PendingPtr = std::shared_ptr<PendingDecision>;

}  // namespace

class RedisStore::Impl {
 public:
  explicit Impl(RedisStoreOptions options)
      : options_(std::move(options)),
        work_(asio::make_work_guard(io_)),
        breaker_(options_.breaker_failures, options_.breaker_open),
        denials_(options_.denial_cache_size) {
    for (int i = 0; i < kScriptCount; ++i) scripts_[i].body = AssembleScript(ScriptId(i));
    redis::ConnectionOptions connection;
    connection.host = options_.host;
    connection.port = options_.port;
    connection.connect_timeout = options_.connect_timeout;
    connection.reconnect_min = options_.reconnect_min;
    connection.reconnect_max = options_.reconnect_max;
    for (int i = 0; i < options_.connections; ++i) {
      auto lane = std::make_unique<Lane>(io_);
      Lane* raw = lane.get();
      lane->connection = std::make_unique<redis::Connection>(
          io_, connection,
          redis::Connection::Hooks{
              [this] { return HandshakeCommands(); },
              [this](std::size_t index, const redisReply& reply) {
                return CheckHandshake(index, reply);
              },
              [this, raw] { OnReady(*raw); },
              [this, raw](const absl::Status& status) { OnDown(*raw, status); },
          });
      lanes_.push_back(std::move(lane));
    }
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Impl() {
    std::promise<void> stopped;
    asio::post(io_, [this, &stopped] {
      for (auto& lane : lanes_) {
        lane->connection->Stop();
        lane->sweep.cancel();
        std::deque<PendingPtr> queued;
        {
          std::lock_guard lock(lane->mu);
          queued.swap(lane->queued);
        }
        for (auto& pending : queued) Complete(*pending, absl::CancelledError("store closed"));
        for (auto& pending : lane->deadlines) {
          Complete(*pending, absl::CancelledError("store closed"));
        }
        lane->deadlines.clear();
      }
      stopped.set_value();
    });
    stopped.get_future().wait();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // Connects every lane; succeeds once one is ready, fails with the first lane's error
  // when none gets there.
  absl::Status Start() {
    asio::post(io_, [this] {
      for (auto& lane : lanes_) lane->connection->Start();
    });
    std::unique_lock lock(start_mu_);
    const bool settled =
        start_cv_.wait_for(lock, options_.connect_timeout + std::chrono::seconds(1),
                           [this] { return ready_lanes_ > 0 || failed_lanes_ >= lanes_.size(); });
    if (ready_lanes_ > 0) return absl::OkStatus();
    if (!settled) {
      return absl::DeadlineExceededError(
          fmt::format("redis unreachable at {}: no answer", options_.Describe()));
    }
    return first_error_;
  }

  void Submit(const DecideRequest& request, DecisionCallback done) {
    const StateKind kind = core::KindOf(request.policy);
    std::string redis_key = options_.prefix;
    redis_key.append(core::KeyTag(kind)).append(":").append(request.key);
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
    auto pending = std::make_shared<PendingDecision>(PendingDecision{
        std::move(redis_key), key_at, request.policy, request.cost,
        request.now ? std::optional(request.now->time_since_epoch().count()) : std::nullopt, kind,
        now + options_.timeout, std::move(done)});
    if (!breaker_.Allow(now)) {
      // Not a new failure (the breaker's own refusal must not keep it open): answer as
      // on_error says, at memory speed.
      pending->answered = true;
      pending->done(Fallback(*pending));
      return;
    }
    Lane* lane = PickLane();
    if (lane == nullptr) {
      return Complete(*pending, absl::UnavailableError(LastError()));
    }
    std::lock_guard lock(lane->mu);
    lane->queued.push_back(std::move(pending));
    if (!lane->flush_posted) {
      lane->flush_posted = true;
      asio::post(io_, [this, lane] { Flush(*lane); });
    }
  }

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
    s.breaker_open = breaker_.open(Steady::now());
    return s;
  }

  bool Ping() {
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    asio::post(io_, [this, done] {
      for (auto& lane : lanes_) {
        if (!lane->connection->ready()) continue;
        std::string command;
        redis::AppendCommand(command, {"PING"});
        lane->connection->Send(command, [done](absl::StatusOr<redis::Reply> reply) {
          done->set_value(reply.ok() && (*reply)->type == REDIS_REPLY_STATUS);
        });
        return;
      }
      done->set_value(false);
    });
    return result.wait_for(options_.timeout) == std::future_status::ready && result.get();
  }

  const RedisStoreOptions& options() const { return options_; }

 private:
  struct Lane {
    explicit Lane(asio::io_context& io) : sweep(io) {}
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

  struct Script {
    std::string body;
    std::string sha;  // from SCRIPT LOAD, written on the I/O thread during handshakes
  };

  struct Counters {
    std::atomic<std::uint64_t> calls{0}, batched{0}, errors{0}, timeouts{0}, degraded{0},
        denial_cache_hits{0}, noscript{0}, reconnects{0};
  };

  std::vector<std::string> HandshakeCommands() const {
    std::vector<std::string> commands;
    std::string command;
    if (!options_.password.empty()) {
      if (options_.user.empty()) {
        redis::AppendCommand(command, {"AUTH", options_.password});
      } else {
        redis::AppendCommand(command, {"AUTH", options_.user, options_.password});
      }
      commands.push_back(std::exchange(command, {}));
    }
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

  absl::Status CheckHandshake(std::size_t index, const redisReply& reply) {
    const std::size_t auth = options_.password.empty() ? 0 : 1;
    const std::size_t select = options_.db != 0 ? 1 : 0;
    if (reply.type == REDIS_REPLY_ERROR) {
      const std::string_view text = redis::TextOf(reply);
      if (index < auth) {
        return absl::PermissionDeniedError(
            fmt::format("redis at {} refused AUTH: {}", options_.Describe(), text));
      }
      if (text.starts_with("NOAUTH")) {
        return absl::PermissionDeniedError(fmt::format(
            "redis at {} needs a password: {} (give it in the URL: redis://:PASSWORD@host:port)",
            options_.Describe(), text));
      }
      const char* step = index < auth + select ? "SELECT" : "SCRIPT LOAD";
      return absl::FailedPreconditionError(
          fmt::format("redis at {} refused {}: {}", options_.Describe(), step, text));
    }
    if (index >= auth + select) {
      if (reply.type != REDIS_REPLY_STRING) {
        return absl::InternalError("SCRIPT LOAD did not answer with a SHA");
      }
      scripts_[index - auth - select].sha = std::string(redis::TextOf(reply));
    }
    return absl::OkStatus();
  }

  void OnReady(Lane& lane) {
    lane.ready = true;
    std::lock_guard lock(start_mu_);
    ++ready_lanes_;
    start_cv_.notify_all();
  }

  void OnDown(Lane& lane, const absl::Status& status) {
    if (lane.ready.exchange(false)) ++stats_.reconnects;
    std::lock_guard lock(start_mu_);
    if (first_error_.ok()) first_error_ = status;
    last_error_ = std::string(MessageOf(status));
    if (!lane.reported_down) {
      lane.reported_down = true;
      ++failed_lanes_;
    }
    start_cv_.notify_all();
  }

  std::string LastError() {
    std::lock_guard lock(start_mu_);
    return last_error_.empty() ? fmt::format("redis at {} is not connected", options_.Describe())
                               : last_error_;
  }

  Lane* PickLane() {
    const std::size_t n = lanes_.size();
    const std::size_t start = next_lane_.fetch_add(1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      Lane* lane = lanes_[(start + i) % n].get();
      if (lane->ready.load(std::memory_order_relaxed)) return lane;
    }
    return nullptr;
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
      if (!lane.connection->ready()) {
        Complete(*pending, absl::UnavailableError(LastError()));
      } else if (now >= pending->deadline) {
        Complete(*pending, TimeoutError());
      } else {
        lane.deadlines.push_back(pending);
        live.push_back(std::move(pending));
      }
    }
    ArmSweep(lane);
    const std::size_t batch = static_cast<std::size_t>(options_.max_batch);
    for (std::size_t i = 0; i < live.size(); i += batch) {
      std::vector<PendingPtr> chunk(live.begin() + i,
                                    live.begin() + std::min(live.size(), i + batch));
      Send(lane, std::move(chunk), /*as_eval=*/false);
    }
  }

  // One script call for `chunk`: the algorithm's script for a lone decision, the batch
  // script for several. `as_eval` sends the body (after NOSCRIPT: Redis restarted or
  // flushed its scripts); EVAL caches it again for the next EVALSHA.
  void Send(Lane& lane, std::vector<PendingPtr> chunk, bool as_eval) {
    const ScriptId id = chunk.size() == 1 ? SingleScriptFor(chunk[0]->kind) : kScriptBatch;
    // Decimal arguments, kept alive until the command is formatted (the vector is sized
    // up front, so the views into it stay valid).
    std::vector<std::string> numbers;
    numbers.reserve(1 + chunk.size() * 7);
    const auto number = [&numbers](std::string text) -> std::string_view {
      return numbers.emplace_back(std::move(text));
    };
    const auto now_arg = [](const PendingDecision& p) {
      return p.now_us ? std::to_string(*p.now_us) : std::string();
    };
    std::vector<std::string_view> args;
    args.reserve(8 + chunk.size() * 4);
    args.push_back(as_eval ? "EVAL" : "EVALSHA");
    args.push_back(as_eval ? scripts_[id].body : scripts_[id].sha);
    args.push_back(number(std::to_string(chunk.size())));
    for (const auto& p : chunk) args.push_back(p->redis_key);
    if (chunk.size() == 1) {  // lua/single.lua: kind, now, limit, period, burst, cost
      const PendingDecision& p = *chunk[0];
      args.push_back(core::KeyTag(p.kind));
      args.push_back(number(now_arg(p)));
      args.push_back(number(std::to_string(p.policy.limit)));
      args.push_back(number(std::to_string(p.policy.period.count())));
      args.push_back(number(std::to_string(p.policy.capacity())));
      args.push_back(number(std::to_string(p.cost)));
    } else {  // lua/batch.lua: the distinct policies once, then (policy, now, cost) each
      std::vector<const PendingDecision*> policies;
      std::vector<std::size_t> policy_of(chunk.size());
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        const PendingDecision& p = *chunk[i];
        std::size_t j = 0;
        while (j < policies.size() &&
               !(policies[j]->kind == p.kind && policies[j]->policy == p.policy)) {
          ++j;
        }
        if (j == policies.size()) policies.push_back(&p);
        policy_of[i] = j + 1;
      }
      args.push_back(number(std::to_string(policies.size())));
      for (const PendingDecision* p : policies) {
        args.push_back(core::KeyTag(p->kind));
        args.push_back(number(std::to_string(p->policy.limit)));
        args.push_back(number(std::to_string(p->policy.period.count())));
        args.push_back(number(std::to_string(p->policy.capacity())));
      }
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        args.push_back(number(std::to_string(policy_of[i])));
        args.push_back(number(now_arg(*chunk[i])));
        args.push_back(number(std::to_string(chunk[i]->cost)));
      }
    }
    std::string command;
    redis::AppendCommand(command, args);
    ++stats_.calls;
    if (chunk.size() > 1) stats_.batched += chunk.size();
    ++lane.calls_out;
    lane.connection->Send(command, [this, &lane, chunk = std::move(chunk),
                                    as_eval](absl::StatusOr<redis::Reply> reply) mutable {
      --lane.calls_out;
      OnReply(lane, std::move(chunk), as_eval, std::move(reply));
      if (lane.holding) Flush(lane);
    });
  }

  void OnReply(Lane& lane, std::vector<PendingPtr> chunk, bool as_eval,
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
        return Send(lane, std::move(chunk), /*as_eval=*/true);
      }
      const absl::Status error =
          absl::InternalError(fmt::format("redis at {}: {}", options_.Describe(), text));
      for (auto& p : chunk) Complete(*p, error);
      return;
    }
    if (r.type != REDIS_REPLY_ARRAY || r.elements != chunk.size() * 4) {
      const absl::Status error = absl::InternalError(fmt::format(
          "redis at {} answered a decision with an unexpected reply", options_.Describe()));
      for (auto& p : chunk) Complete(*p, error);
      return;
    }
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      redisReply* const* e = r.element + i * 4;
      if (e[0]->type != REDIS_REPLY_INTEGER || e[1]->type != REDIS_REPLY_INTEGER ||
          e[2]->type != REDIS_REPLY_INTEGER || e[3]->type != REDIS_REPLY_INTEGER) {
        Complete(*chunk[i], absl::InternalError("redis answered a decision with a non-integer"));
        continue;
      }
      Decision d;
      d.allowed = e[0]->integer == 1;
      d.limit = chunk[i]->policy.limit;
      d.remaining = e[1]->integer;
      d.retry_after = std::chrono::microseconds(e[2]->integer);
      d.reset_after = std::chrono::microseconds(e[3]->integer);
      Complete(*chunk[i], d);
    }
  }

  absl::Status TimeoutError() const {
    return absl::DeadlineExceededError(fmt::format("redis at {} did not answer within {} µs",
                                                   options_.Describe(), options_.timeout.count()));
  }

  void ArmSweep(Lane& lane) {
    if (lane.sweeping || (lane.deadlines.empty() && !lane.holding)) return;
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
        Complete(*lane.deadlines.front(), TimeoutError());
        lane.deadlines.pop_front();
      }
      // A connection whose oldest command has waited this long is taken for dead (a
      // half-open TCP connection raises no error for hours) and replaced.
      const auto stall_limit =
          std::max<Steady::duration>(std::chrono::seconds(1), options_.timeout * 20);
      if (lane.connection->OldestWait(now) > stall_limit) {
        lane.connection->Abort(absl::DeadlineExceededError(fmt::format(
            "redis at {} answered nothing for {} ms; reconnecting", options_.Describe(),
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
    if (p.answered) return;
    p.answered = true;
    const Steady::time_point now = Steady::now();
    if (result.ok()) {
      breaker_.Success();
      if (!result->allowed && !p.now_us && options_.denial_cache_min.count() > 0 &&
          result->retry_after >= options_.denial_cache_min) {
        denials_.Insert(p.redis_key, p.policy, p.cost, *result, now);
      }
      p.done(*std::move(result));
      return;
    }
    if (absl::IsCancelled(result.status())) {
      p.done(result.status());
      return;
    }
    ++stats_.errors;
    if (absl::IsDeadlineExceeded(result.status())) ++stats_.timeouts;
    breaker_.Failure(now);
    p.done(Fallback(p));
  }

  Decision Fallback(const PendingDecision& p) {
    ++stats_.degraded;
    Decision d;
    d.limit = p.policy.limit;
    d.degraded = true;
    switch (options_.on_error) {
      case OnError::kFailOpen:
        d.allowed = true;
        d.remaining = std::max<std::int64_t>(0, p.policy.capacity() - p.cost);
        break;
      case OnError::kFailClosed:
        // A hint, not a promise: come back after the breaker's open period.
        d.retry_after = std::min<std::chrono::microseconds>(p.policy.period, options_.breaker_open);
        d.reset_after = d.retry_after;
        break;
      case OnError::kLocal: {
        DecideRequest local{std::string_view(p.redis_key).substr(p.key_at), p.policy, p.cost,
                            std::nullopt};
        if (p.now_us) local.now = TimePoint(std::chrono::microseconds(*p.now_us));
        absl::StatusOr<Decision> decided = local_.Decide(local);
        if (decided.ok()) d = *decided;
        d.degraded = true;
        break;
      }
    }
    return d;
  }

  RedisStoreOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::array<Script, kScriptCount> scripts_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<std::size_t> next_lane_{0};
  redis::Breaker breaker_;
  redis::DenialCache denials_;
  MemoryStore local_;
  Counters stats_;
  std::mutex start_mu_;
  std::condition_variable start_cv_;
  std::size_t ready_lanes_ = 0;
  std::size_t failed_lanes_ = 0;
  absl::Status first_error_;
  std::string last_error_;
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
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

StoreStats RedisStore::Stats() const { return {}; }
std::string RedisStore::Describe() const { return impl_->options().Describe(); }
RedisStats RedisStore::redis_stats() const { return impl_->Stats(); }
bool RedisStore::Ping() { return impl_->Ping(); }

}  // namespace floodgate
