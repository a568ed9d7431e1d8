// floodgate bench: drive a store from T threads and report throughput and latency.
#include <floodgate/policy.h>
#include <floodgate/redis_store.h>
#include <floodgate/store.h>
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/bench_support.h"
#include "cli/commands.h"
#include "common/strings.h"

namespace floodgate::cli {

namespace {

// "gcra:10/1s + fixed_window:10000/1d": the policies every request is decided on.
std::string Describe(const std::vector<Policy>& policies) {
  std::string out;
  for (const Policy& p : policies) out += (out.empty() ? "" : " + ") + p.ToString();
  return out;
}

// How one request of the load went.
struct Answer {
  bool ok = false;
  bool allowed = false;
  bool degraded = false;
};

struct ThreadResult {
  std::uint64_t allowed = 0, denied = 0, errors = 0, degraded = 0;
  LatencyHistogram latency;

  void Record(Answer answer, std::chrono::nanoseconds took) {
    latency.Record(took.count());
    if (!answer.ok) {
      ++errors;
    } else {
      ++(answer.allowed ? allowed : denied);
      degraded += answer.degraded;
    }
  }
};

// What a request is: a decision (Check), a reservation of 1 settled at `actual` once
// admitted (Reserve + Settle), or a lease acquired and, unless the run holds them, released
// once admitted (Acquire + Release). A request counts once its last call is answered.
enum class Mode { kCheck, kReserve, kAcquire };

struct ModeOptions {
  Mode mode = Mode::kCheck;
  std::int64_t actual = 1;  // kReserve: what each admitted reservation is settled at
  bool hold = false;        // kAcquire: keep the leases (nothing released)
};

// What each request asks the store: one policy's decision on its key, or with several
// policies (or `multi`) a multi-decision over all of them, each on `<key>/<i>`
// (`{<key>}/<i>` with same_slot: the client in a hash tag, as `floodgate serve` keys a
// rule's limits), or with `one_by_one` a single decision on each of those keys, not all
// or nothing (what deciding the limits apart costs); or, by `mode`, a reservation or a
// lease on its key.
class Load {
 public:
  Load(Store& store, std::vector<Policy> policies, bool same_slot, bool multi, bool one_by_one,
       ModeOptions mode)
      : store_(store),
        policies_(std::move(policies)),
        same_slot_(same_slot),
        multi_(!one_by_one && (multi || policies_.size() > 1)),
        one_by_one_(one_by_one),
        mode_(mode) {}

  Answer Decide(std::string_view key) {
    if (mode_.mode != Mode::kCheck) {
      const absl::StatusOr<Reservation> held = Hold(key);
      if (!Settles(held)) return Of(held);
      const absl::StatusOr<Decision> settled = store_.Settle(Finish(held->id));
      return settled.ok() ? Of(held) : Answer{};
    }
    if (one_by_one_) {
      Answer all{true, true, false};
      for (const CheckItem& item : Items(key).items) {
        all = Both(all, Of(store_.Decide(DecideRequest{item.key, item.policy, 1, std::nullopt})));
      }
      return all;
    }
    if (!multi_) {
      return Of(store_.Decide(DecideRequest{key, policies_.front(), 1, std::nullopt}));
    }
    return Of(store_.DecideAll(Items(key)));
  }

  // `done` may run on the store's I/O thread.
  void DecideAsync(std::string_view key, absl::AnyInvocable<void(Answer)> done) {
    if (mode_.mode != Mode::kCheck) {
      auto finish = [this, done = std::move(done)](absl::StatusOr<Reservation> held) mutable {
        if (!Settles(held)) return done(Of(held));
        const Answer answer = Of(held);
        store_.SettleAsync(Finish(held->id),
                           [answer, done = std::move(done)](absl::StatusOr<Decision> d) mutable {
                             done(d.ok() ? answer : Answer{});
                           });
      };
      if (mode_.mode == Mode::kAcquire) {
        return store_.AcquireAsync(AcquireRequest{key, policies_.front(), std::nullopt},
                                   std::move(finish));
      }
      return store_.ReserveAsync(ReserveOne(key), std::move(finish));
    }
    if (one_by_one_) {
      // The request's answer once every decision is in (any thread may bring the last).
      struct Join {
        std::mutex mu;
        std::size_t left;
        Answer all{true, true, false};
        absl::AnyInvocable<void(Answer)> done;
      };
      auto join = std::make_shared<Join>();
      join->left = policies_.size();
      join->done = std::move(done);
      for (const CheckItem& item : Items(key).items) {
        store_.DecideAsync(DecideRequest{item.key, item.policy, 1, std::nullopt},
                           [join](absl::StatusOr<Decision> d) {
                             const Answer one = Of(d);
                             std::unique_lock lock(join->mu);
                             join->all = Both(join->all, one);
                             if (--join->left > 0) return;
                             const Answer all = join->all;
                             lock.unlock();
                             join->done(all);
                           });
      }
      return;
    }
    if (!multi_) {
      return store_.DecideAsync(
          DecideRequest{key, policies_.front(), 1, std::nullopt},
          [done = std::move(done)](absl::StatusOr<Decision> d) mutable { done(Of(d)); });
    }
    // The store copies the items' keys: the buffers are the next request's.
    store_.DecideAllAsync(
        Items(key),
        [done = std::move(done)](absl::StatusOr<MultiDecision> d) mutable { done(Of(d)); });
  }

 private:
  // A request decided one by one: answered, allowed and degraded as its decisions together.
  static Answer Both(const Answer& a, const Answer& b) {
    return {a.ok && b.ok, a.allowed && b.allowed, a.degraded || b.degraded};
  }
  template <class T>
  static Answer Of(const absl::StatusOr<T>& d) {
    if (!d.ok()) return {};
    return {true, d->allowed, d->degraded};
  }
  static Answer Of(const absl::StatusOr<Reservation>& r) {
    if (!r.ok()) return {};
    return {true, r->decision.allowed, r->decision.degraded};
  }

  ReserveRequest ReserveOne(std::string_view key) const {
    return ReserveRequest{key, policies_.front(), 1, kDefaultHold, std::nullopt};
  }
  absl::StatusOr<Reservation> Hold(std::string_view key) {
    if (mode_.mode == Mode::kAcquire) {
      return store_.Acquire(AcquireRequest{key, policies_.front(), std::nullopt});
    }
    return store_.Reserve(ReserveOne(key));
  }
  // Whether the request goes on to a settle (a release): only what was held, and no lease
  // of a run that keeps them.
  bool Settles(const absl::StatusOr<Reservation>& held) const {
    return held.ok() && !held->id.empty() && !(mode_.mode == Mode::kAcquire && mode_.hold);
  }
  // A release is the settle at 0 (Store::Release).
  SettleRequest Finish(std::string_view id) const {
    return SettleRequest{id, mode_.mode == Mode::kAcquire ? 0 : mode_.actual, std::nullopt};
  }

  // The keys are written into buffers kept from request to request, from suffixes made
  // once, not formatted anew: what the load generator spends per request is not the
  // store's cost, and a single decision (which uses the key as it is) spends nothing on
  // it.
  MultiRequest Items(std::string_view key) {
    if (items_.empty()) {
      for (std::size_t i = 0; i < policies_.size(); ++i) {
        suffixes_.push_back((same_slot_ ? "}/" : "/") + std::to_string(i));
      }
      keys_.resize(policies_.size());
      items_.resize(policies_.size());
    }
    for (std::size_t i = 0; i < policies_.size(); ++i) {
      const std::string_view open = same_slot_ ? "{" : "", suffix = suffixes_[i];
      std::string& k = keys_[i];
      k.resize(open.size() + key.size() + suffix.size());
      std::copy(suffix.begin(), suffix.end(),
                std::copy(key.begin(), key.end(), std::copy(open.begin(), open.end(), k.data())));
      items_[i] = CheckItem{k, policies_[i], 1, {}, false};
    }
    return MultiRequest{items_, std::nullopt};
  }

  Store& store_;
  const std::vector<Policy> policies_;
  const bool same_slot_;
  const bool multi_;       // every request through the multi-decision API
  const bool one_by_one_;  // every request a single decision per policy
  const ModeOptions mode_;
  // One Load per thread: buffers reused request to request.
  std::vector<std::string> suffixes_;  // "/<i>", or "}/<i>" after "{<key>"
  std::vector<std::string> keys_;
  std::vector<CheckItem> items_;
};

using Steady = std::chrono::steady_clock;

// One decision at a time: the caller's thread waits for each answer.
std::uint64_t RunBlocking(Load& load, const std::vector<std::string>& keys,
                          const KeySequence& sequence, std::uint64_t cap,
                          const std::atomic<bool>& stop, ThreadResult& result) {
  std::uint64_t i = 0;
  for (; i < cap && ((i & 63) != 0 || !stop.load(std::memory_order_relaxed)); ++i) {
    const auto begin = Steady::now();
    const Answer answer = load.Decide(keys[sequence[i]]);
    result.Record(answer, Steady::now() - begin);
  }
  return i;
}

// `concurrency` decisions in flight through DecideAsync; answers may arrive on the
// store's I/O thread, so the counters are shared under a lock.
// With `rate` > 0 the load is open-loop: request i is due at start + i / rate, and its
// latency counts from when it was due, not from when it could be sent, so a stalled store
// shows up in the percentiles instead of hiding behind fewer requests sent
// ("coordinated omission").
std::uint64_t RunPipelined(Load& load, const std::vector<std::string>& keys,
                           const KeySequence& sequence, std::uint64_t cap, int concurrency,
                           double rate, const std::atomic<bool>& stop, ThreadResult& result) {
  // The issuing thread sleeps on the atomic only when all slots are taken; answers wake
  // it only then (libstdc++ skips the futex call when nobody waits).
  std::atomic<int> in_flight{0};
  std::mutex mu;  // guards `result`: answers may arrive on the store's I/O thread
  const auto start = Steady::now();
  std::uint64_t i = 0;
  for (; i < cap && !stop.load(std::memory_order_relaxed); ++i) {
    auto begin = Steady::now();
    if (rate > 0) {
      begin = start + std::chrono::duration_cast<Steady::duration>(
                          std::chrono::duration<double>(static_cast<double>(i) / rate));
      std::this_thread::sleep_until(begin);  // pacing the offered load, not synchronisation
    }
    for (int n = in_flight.load(); n >= concurrency; n = in_flight.load()) in_flight.wait(n);
    in_flight.fetch_add(1);
    load.DecideAsync(keys[sequence[i]], [&, begin](Answer answer) {
      {
        std::lock_guard lock(mu);
        result.Record(answer, Steady::now() - begin);
      }
      in_flight.fetch_sub(1);
      in_flight.notify_one();
    });
  }
  for (int n = in_flight.load(); n > 0; n = in_flight.load()) in_flight.wait(n);
  return i;
}

}  // namespace

Command AddBench(CLI::App& app) {
  struct Flags {
    std::string store = "memory://";
    std::vector<std::string> policies = {"gcra:1000/1s"};
    bool same_slot = false;
    bool multi = false;
    bool one_by_one = false;
    std::size_t keys = 100'000;
    double zipf = 0;
    int threads = 1;
    int concurrency = 1;
    std::string duration = "5s";
    std::uint64_t max_decisions = 1'000'000'000;
    bool json = false;
    double rate = 0;
    std::string mode = "check";
    std::int64_t actual = 1;
    bool hold = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Drive a store with generated traffic; print decisions/s and latency");
  cmd->add_option("--store", flags->store, "store URL")->capture_default_str();
  cmd->add_option("--policy", flags->policies,
                  "policy for every key; given several times, each request is one decision "
                  "over all of them, all or nothing (a key per policy)")
      ->capture_default_str();
  cmd->add_flag("--same-slot", flags->same_slot,
                "with several policies, put a request's keys in one {hash tag}: one Redis "
                "Cluster slot");
  cmd->add_flag("--multi", flags->multi,
                "decide through the multi-decision API (Store::DecideAll) even with one "
                "policy: what a multi-decision of one item costs next to a single decision");
  cmd->add_flag("--one-by-one", flags->one_by_one,
                "with several policies, a single decision per policy instead of one "
                "multi-decision (not all or nothing): what deciding the limits apart costs");
  cmd->add_option("--keys", flags->keys, "distinct keys (1 hammers one key)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--zipf", flags->zipf, "Zipf exponent of key popularity (0: uniform)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "client threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--concurrency", flags->concurrency,
                  "requests in flight per thread (asynchronous stores; memory:// decides "
                  "inline, so it always has one)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "how long to run at most (a run bounded by --max-decisions ends when they are "
                  "done), e.g. 10s")
      ->capture_default_str();
  cmd->add_option("--max-decisions", flags->max_decisions,
                  "stop after this many decisions (each thread its share)")
      ->capture_default_str();
  cmd->add_option("--rate", flags->rate,
                  "offered load in decisions/s over all threads (open loop); 0: as fast as "
                  "possible")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "one JSON object on one line");
  cmd->add_option("--mode", flags->mode,
                  "check: one decision per request; reserve: Reserve 1, then Settle at "
                  "--actual once admitted; acquire: Acquire a lease (--policy "
                  "concurrency:N[,lease=T]), then Release it once admitted, unless --hold")
      ->check(CLI::IsMember({"check", "reserve", "acquire"}))
      ->capture_default_str();
  cmd->add_option("--actual", flags->actual, "--mode reserve: the settled cost")
      ->check(CLI::Range(std::int64_t{0}, kMaxCost))
      ->capture_default_str();
  cmd->add_flag("--hold", flags->hold, "--mode acquire: keep every lease (no release)");

  return {
      cmd, [flags]() -> int {
        const auto fail = [](std::string_view why) {
          fmt::print(stderr, "floodgate bench: {}\n", why);
          return kExitError;
        };
        std::vector<Policy> policies;
        for (const std::string& text : flags->policies) {
          auto policy = Policy::Parse(text);
          if (!policy.ok()) return fail(MessageOf(policy.status()));
          policies.push_back(*policy);
        }
        if (policies.size() > kMaxItems) {
          return fail(fmt::format("at most {} policies (one decision's items)", kMaxItems));
        }
        const ModeOptions mode{flags->mode == "reserve"   ? Mode::kReserve
                               : flags->mode == "acquire" ? Mode::kAcquire
                                                          : Mode::kCheck,
                               flags->actual, flags->hold};
        if (mode.mode != Mode::kCheck && (policies.size() != 1 || flags->multi)) {
          return fail("--mode reserve and acquire take one policy, not --multi");
        }
        if (flags->one_by_one && (policies.size() < 2 || flags->multi)) {
          return fail("--one-by-one takes several policies, and not --multi");
        }
        auto duration = ParseDuration(flags->duration);
        if (!duration.ok()) return fail(fmt::format("--duration {}", MessageOf(duration.status())));
        auto store = OpenStore(flags->store);
        if (!store.ok()) return fail(MessageOf(store.status()));

        const std::vector<std::string> keys = MakeKeys(flags->keys);
        std::vector<ThreadResult> results(flags->threads);
        const std::uint64_t per_thread_cap =
            std::max<std::uint64_t>(1, flags->max_decisions / flags->threads);
        const LoopResult loop =
            RunTimed(flags->threads, *duration, [&](int t, const std::atomic<bool>& stop) {
              const KeySequence sequence(keys.size(), flags->zipf, 1000 + t);
              Load load(**store, policies, flags->same_slot, flags->multi, flags->one_by_one, mode);
              return flags->concurrency == 1 && flags->rate == 0
                         ? RunBlocking(load, keys, sequence, per_thread_cap, stop, results[t])
                         : RunPipelined(load, keys, sequence, per_thread_cap, flags->concurrency,
                                        flags->rate / flags->threads, stop, results[t]);
            });

        ThreadResult total;
        for (const ThreadResult& r : results) {
          total.allowed += r.allowed;
          total.denied += r.denied;
          total.errors += r.errors;
          total.degraded += r.degraded;
          total.latency.Merge(r.latency);
        }
        // Script calls a Redis store made: decisions per call shows how well they batched.
        std::uint64_t store_calls = 0;
        if (const auto* redis = dynamic_cast<const RedisStore*>(store->get())) {
          store_calls = redis->redis_stats().calls;
        }
        const double rate = loop.operations / loop.seconds;
        const auto us = [&](double q) { return total.latency.Percentile(q) / 1000.0; };
        if (flags->json) {
          nlohmann::json j = {
              {"store", (*store)->Describe()},
              {"policy", Describe(policies)},
              {"multi", !flags->one_by_one && (flags->multi || policies.size() > 1)},
              {"one_by_one", flags->one_by_one},
              {"mode", flags->mode},
              {"keys", flags->keys},
              {"zipf", flags->zipf},
              {"threads", flags->threads},
              {"concurrency", flags->concurrency},
              {"seconds", loop.seconds},
              {"decisions", loop.operations},
              {"decisions_per_sec", rate},
              {"allowed", total.allowed},
              {"denied", total.denied},
              {"errors", total.errors},
              {"degraded", total.degraded},
              {"p50_us", us(0.50)},
              {"p90_us", us(0.90)},
              {"p99_us", us(0.99)},
              {"p999_us", us(0.999)},
              {"offered_rate", flags->rate},
              {"store_calls", store_calls},
          };
          fmt::print("{}\n", j.dump());
        } else {
          fmt::print(
              "store        {}\npolicy       {}\nkeys         {}{}\nthreads      {} "
              "(concurrency {})\nduration     {:.2f} s\n\ndecisions/s  {:.0f}\nallowed      "
              "{}\ndenied       {}\nerrors       {}\nlatency µs   p50 {:.2f}  p90 {:.2f}  "
              "p99 {:.2f}  p999 {:.2f}  (includes ~0.02 µs of clock reads)\n{}",
              (*store)->Describe(), Describe(policies), flags->keys,
              flags->zipf > 0 ? fmt::format(" (zipf {})", flags->zipf) : " (uniform)",
              flags->threads, flags->concurrency, loop.seconds, rate, total.allowed, total.denied,
              total.errors, us(0.50), us(0.90), us(0.99), us(0.999),
              store_calls == 0 ? std::string()
                               : fmt::format("script calls {} ({:.1f} decisions per call)\n",
                                             store_calls, double(loop.operations) / store_calls));
        }
        return total.errors > 0 ? kExitError : kExitAllowed;
      }};
}

}  // namespace floodgate::cli
