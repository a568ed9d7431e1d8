#pragma once

// The take(k, δ) model check's parts: random policies, leases spent at random times, envelopes.
//
// docs/prefetch.md states the bound this checks and why it holds. Each trial draws a policy,
// instances that take leases one at a time (k, δ and the take times random) and spend them at
// random times inside each lease (all at its first µs, all at its last, spread, or part of it
// and the rest returned by a settle), and per-request decisions in between; on any store, with
// explicit times. The units spent are then checked against one exact limiter's envelope:
//   fixed_window    units spent in each window <= L;
//   sliding_log     units spent in every (t - P, t] <= L;
//   gcra            units spent in every [s, t] <= B + floor((t - s) / E);
//   token_bucket    smooth: units spent in every [s, t] <= B + L·(t - s)/P;
//                   interval: <= B + L·ceil((t - s)/P) (refill instants are >= P apart);
//   sliding_window  at every spend, the estimate of the units *spent* (prev·(P - x)/P + cur,
//                   cur counting the units spent so far in the window, those at that µs
//                   included) <= L: the rule each admission of one exact limiter obeys.
// Seeded; the tests print their seed; FG_TAKE_MODEL_SEED=<n> replays one.
#include <floodgate/store.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "test_time.h"

namespace floodgate::take_model {

using std::chrono::microseconds;

inline TimePoint At(std::int64_t us) { return TimePoint(microseconds(us)); }

inline std::uint64_t ModelSeed() {
  if (const char* s = std::getenv("FG_TAKE_MODEL_SEED"); s != nullptr) {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

// A random valid policy of `algorithm` (gcra: a period that L divides, so E is exact).
inline Policy RandomPolicy(std::mt19937_64& rng, Algorithm algorithm, Refill refill) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Policy policy;
  policy.algorithm = algorithm;
  policy.refill = refill;
  policy.limit = pick(1, 16);
  if (algorithm == Algorithm::kGcra) {
    policy.period = microseconds(policy.limit * pick(1'000, 20'000));
  } else {
    policy.period = microseconds(pick(2'000, 200'000));
  }
  if (algorithm == Algorithm::kGcra || algorithm == Algorithm::kTokenBucket) {
    policy.burst = pick(0, 1) == 0 ? 0 : pick(1, 3 * policy.limit);
  }
  EXPECT_TRUE(policy.Validate().ok()) << policy.ToString();
  return policy;
}

struct Event {
  std::int64_t time;
  std::uint64_t seq;  // ties: the order they were scheduled in
  enum Kind { kTake, kDecide, kReturn } kind;
  int instance = 0;
  std::int64_t amount = 0;  // decide: the cost; return: the units spent (settle's actual)
  std::string id;
  friend bool operator>(const Event& a, const Event& b) {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

// One trial: the units spent at each µs, and a log of what happened (printed on failure).
struct Trial {
  std::map<std::int64_t, std::int64_t> spent;
  std::vector<std::string> log;
};

inline Trial Simulate(std::mt19937_64& rng, Store& store, const std::string& key,
                      const Policy& policy) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t period = policy.period.count();
  const std::int64_t horizon = T0 + 6 * period;
  Trial trial;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::uint64_t seq = 0;
  const int instances = static_cast<int>(pick(1, 4));
  for (int i = 0; i < instances; ++i) {
    events.push(Event{T0 + pick(0, period), seq++, Event::kTake, i});
  }
  const std::int64_t decisions = pick(0, 4 * policy.limit);
  for (std::int64_t d = 0; d < decisions; ++d) {
    events.push(Event{T0 + pick(0, 6 * period), seq++, Event::kDecide, -1, pick(1, 3)});
  }
  const auto spend = [&](std::int64_t t, std::int64_t units) {
    if (units > 0) trial.spent[t] += units;
  };
  while (!events.empty()) {
    Event e = events.top();
    events.pop();
    if (e.kind == Event::kDecide) {
      auto d = store.Decide(DecideRequest{key, policy, e.amount, At(e.time)});
      EXPECT_TRUE(d.ok()) << d.status();
      if (d.ok() && d->allowed) spend(e.time, e.amount);
      trial.log.push_back(fmt::format("t={} decide {} -> {}", e.time - T0, e.amount,
                                      d.ok() && d->allowed ? "allowed" : "denied"));
      continue;
    }
    if (e.kind == Event::kReturn) {
      auto d = store.Settle(SettleRequest{e.id, e.amount, At(e.time)});
      EXPECT_TRUE(d.ok()) << "a return inside its lease is a settle: " << d.status();
      trial.log.push_back(
          fmt::format("t={} instance {} returns, spent {}", e.time - T0, e.instance, e.amount));
      continue;
    }
    // A take; the instance takes its next lease once this one is over.
    const std::int64_t up_to = pick(1, 2 * policy.limit + 1);
    const std::int64_t lifetime = pick(1'000, period + period / 2);
    auto r = store.Take(TakeRequest{key, policy, up_to, microseconds(lifetime), At(e.time)});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    const std::int64_t u = e.time;
    const std::int64_t units = r->units;
    const std::int64_t ends = r->expires.time_since_epoch().count();
    std::int64_t next = u + pick(1, period / 2);
    if (units > 0) {
      EXPECT_GT(ends, u);
      EXPECT_LE(ends, u + lifetime);
      EXPECT_LE(units, up_to);
      EXPECT_TRUE(r->decision.allowed);
      if (policy.algorithm == Algorithm::kFixedWindow ||
          policy.algorithm == Algorithm::kSlidingWindow) {
        EXPECT_LE(ends, (u / period + 1) * period) << "a window lease crossed its window's end";
      }
      const std::int64_t last = ends - 1;  // the lease's last µs
      const auto within = [&](std::int64_t lo, std::int64_t hi) { return pick(lo, hi); };
      const int pattern = static_cast<int>(pick(0, 5));
      std::string how;
      switch (pattern) {
        case 0:
          spend(u, units), how = "all at its start";
          break;
        case 1:
          spend(last, units), how = "all at its end";
          break;
        case 2:
          for (std::int64_t i = 0; i < units; ++i) spend(within(u, last), 1);
          how = "spread";
          break;
        case 3:
          spend(u, units / 2), spend(last, units - units / 2), how = "half at each end";
          break;
        default: {  // part of it, the rest returned (pattern 5: returned at its start)
          const std::int64_t at = pattern == 4 ? within(u, last) : u;
          const std::int64_t used = pick(0, units);
          for (std::int64_t i = 0; i < used; ++i) spend(within(u, at), 1);
          events.push(Event{at, seq++, Event::kReturn, e.instance, used, r->id});
          how = fmt::format("{} of it by t={}, the rest returned", used, at - T0);
        }
      }
      trial.log.push_back(fmt::format("t={} instance {} takes {} (k={}, δ={}) until t={}: {}",
                                      u - T0, e.instance, units, up_to, lifetime, ends - T0, how));
      next = ends + pick(0, period / 2);
    } else {
      trial.log.push_back(fmt::format("t={} instance {} takes nothing (k={}, δ={}): {}", u - T0,
                                      e.instance, up_to, lifetime,
                                      r->decision.allowed ? "decide per request" : "denied"));
    }
    if (next < horizon) events.push(Event{next, seq++, Event::kTake, e.instance});
  }
  return trial;
}

// The first interval where the units spent exceed one exact limiter's envelope, or "".
inline std::string Violation(const Policy& policy,
                             const std::map<std::int64_t, std::int64_t>& spent) {
  const std::int64_t period = policy.period.count();
  const std::int64_t limit = policy.limit;
  const std::int64_t burst = policy.capacity();
  const std::vector<std::pair<std::int64_t, std::int64_t>> at(spent.begin(), spent.end());
  const auto over_pairs = [&](auto envelope) -> std::string {
    for (std::size_t i = 0; i < at.size(); ++i) {
      std::int64_t n = 0;
      for (std::size_t j = i; j < at.size(); ++j) {
        n += at[j].second;
        if (!envelope(at[j].first - at[i].first, n)) {
          return fmt::format("{} units spent in [{}, {}]", n, at[i].first - T0, at[j].first - T0);
        }
      }
    }
    return "";
  };
  switch (policy.algorithm) {
    case Algorithm::kFixedWindow: {
      std::map<std::int64_t, std::int64_t> per_window;
      for (const auto& [t, n] : at) {
        if ((per_window[t / period] += n) > limit) {
          return fmt::format("{} units spent in window {}", per_window[t / period], t / period);
        }
      }
      return "";
    }
    case Algorithm::kSlidingLog: {
      std::int64_t n = 0;
      std::size_t oldest = 0;
      for (const auto& [t, units] : at) {
        n += units;
        while (at[oldest].first <= t - period) n -= at[oldest++].second;
        if (n > limit) return fmt::format("{} units spent in ({}, {}]", n, t - period - T0, t - T0);
      }
      return "";
    }
    case Algorithm::kGcra: {
      const std::int64_t emission = (period + limit - 1) / limit;
      return over_pairs([&](std::int64_t d, std::int64_t n) { return n <= burst + d / emission; });
    }
    case Algorithm::kTokenBucket:
      if (policy.refill == Refill::kSmooth) {
        return over_pairs([&](std::int64_t d, std::int64_t n) {
          return static_cast<__int128>(n) * period <=
                 static_cast<__int128>(burst) * period + static_cast<__int128>(limit) * d;
        });
      }
      return over_pairs([&](std::int64_t d, std::int64_t n) {
        return n <= burst + limit * ((d + period - 1) / period);
      });
    case Algorithm::kSlidingWindow: {
      std::map<std::int64_t, std::int64_t> per_window;
      for (const auto& [t, n] : at) {
        const std::int64_t w = t / period;
        const std::int64_t cur = per_window[w] += n;
        const auto prev = per_window.find(w - 1);
        const double estimate = static_cast<double>(prev == per_window.end() ? 0 : prev->second) *
                                    static_cast<double>(period - (t - w * period)) /
                                    static_cast<double>(period) +
                                static_cast<double>(cur);
        if (estimate > static_cast<double>(limit) + 1e-9) {
          return fmt::format("estimate {} of the units spent at {}", estimate, t - T0);
        }
      }
      return "";
    }
    case Algorithm::kConcurrency:
      break;
  }
  return "no envelope";
}

// A failed trial, for the failure message: what was violated, and what happened.
inline std::string Report(std::uint64_t seed, int trial_number, const Policy& policy,
                          const std::string& violation, const Trial& trial) {
  std::string report =
      fmt::format("seed {}, trial {}, {}: {} (beyond one exact limiter's envelope)\n", seed,
                  trial_number, policy.ToString(), violation);
  for (const std::string& line : trial.log) report += "  " + line + "\n";
  return report;
}

struct Kind {
  const char* name;
  Algorithm algorithm;
  Refill refill;
};

inline std::vector<Kind> Kinds() {
  return {Kind{"gcra", Algorithm::kGcra, Refill::kSmooth},
          Kind{"token_bucket_smooth", Algorithm::kTokenBucket, Refill::kSmooth},
          Kind{"token_bucket_interval", Algorithm::kTokenBucket, Refill::kInterval},
          Kind{"sliding_log", Algorithm::kSlidingLog, Refill::kSmooth},
          Kind{"sliding_window", Algorithm::kSlidingWindow, Refill::kSmooth},
          Kind{"fixed_window", Algorithm::kFixedWindow, Refill::kSmooth}};
}

}  // namespace floodgate::take_model
