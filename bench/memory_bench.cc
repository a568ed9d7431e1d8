// make bench, memory store part: memory:// gcra against a bare map, and memory per key.
//
// floodgate's memory:// gcra against the bare baseline map (bench/baseline_map.cc), as ratios
// measured pair by pair in the same process, and the resident memory each algorithm's state costs
// per key. With --multi, instead: what a decision over two limits (Limiter::CheckAll) costs next to
// a one-limit decision (Limiter::Check), measured the same way (MeasureMulti).
//
//   memory_bench [--rounds N] [--seconds S] [--markdown FILE] [--csv FILE]
//   memory_bench --multi [--rounds N] [--seconds S] [--markdown FILE] [--csv FILE]
//   memory_bench --rss POLICY [--keys N]     (child mode, one fresh process per policy)
//   memory_bench --profile floodgate|prepared|baseline [--zipf S] [--decisions N] [--time-scale F]
//       one thread, a fixed count and no timer: for instruction counts (valgrind
//       --tool=callgrind); two counts' difference over theirs is the cost per decision.
#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "baseline_map.h"
#include "cli/bench_support.h"

namespace floodgate::bench {
namespace {

using cli::KeySequence;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Child mode: RSS growth of a fresh memory store holding `keys` keys under `policy`.
int MeasureRss(const std::string& policy_text, std::size_t keys, std::size_t key_width) {
  const Policy policy = *Policy::Parse(policy_text);
  MemoryStoreOptions options;
  options.max_keys = keys * 2;
  MemoryStore store(options);
  char key[600];
  std::size_t key_bytes = 0;
  const TimePoint now = SystemNow();
  // Warm the allocator and the shards' first chunks before the baseline reading.
  for (std::size_t i = 0; i < 1000; ++i) {
    const auto end = fmt::format_to(key, "warm:{}", i);
    (void)store.Decide({std::string_view(key, end - key), policy, 1, now});
  }
  const std::size_t before = ResidentBytes();
  for (std::size_t i = 0; i < keys; ++i) {
    const auto end = key_width == 0 ? fmt::format_to(key, "user:{}", i)
                                    : fmt::format_to(key, "{:0>{}}", i, key_width);
    key_bytes += end - key;
    (void)store.Decide({std::string_view(key, end - key), policy, 1, now});
  }
  const std::size_t after = ResidentBytes();
  const double per_key = static_cast<double>(after - before) / keys;
  const double key_avg = static_cast<double>(key_bytes) / keys;
  fmt::print("{} {:.1f} {:.1f} {}\n", policy_text, per_key, key_avg, store.Stats().keys);
  return 0;
}

struct Scenario {
  const char* name;
  double zipf;
  int threads;
};

struct ScenarioResult {
  Scenario scenario;
  // floodgate through Limiter::Check(key, PreparedPolicy), the target's ratio, and through
  // Limiter::Check(key, Policy), which checks and copies the policy on every decision.
  double baseline_rate, floodgate_rate, ratio;
  double per_request_rate, per_request_ratio;
};

// --multi: the cost of a second limit in the same decision (docs/multi.md), through the
// public API, untimed loops as above. Four loops over the same 100,000 keys, each on a
// store of its own (so each holds only the state its limits keep), taking turns within
// each round (ten turns each, the order reversed every other turn):
//   one       Limiter::Check(key, gcra): the one-limit decision;
//   one_multi Limiter::CheckAll({key, gcra}): a multi-decision of that one item, the
//             cost of the multi-decision path alone;
//   second    Limiter::Check(key, sliding_window): the second limit on its own;
//   two       Limiter::CheckAll({key, gcra}, {key, sliding_window}): both, all or nothing.
// Both limits use the same key string: under different algorithms they are two states
// (an item is keyed by its key and algorithm), as `api.burst:{c}` and `api.long:{c}` are
// in the service, without a second key array to read. The rates keep every decision
// allowed (at most ~100 decisions per key per second, 6,000 per minute): the measured
// path is the admitting one, which writes every item. The loop refuses a run in which
// fewer than 99% were allowed.
constexpr const char* kMultiFirst = "gcra:1000/1s";
constexpr const char* kMultiSecond = "sliding_window:60000/1m";
constexpr const char* kMultiVariants[] = {"one", "one_multi", "second", "two"};
constexpr std::size_t kMultiVariantCount = std::size(kMultiVariants);

struct MultiResult {
  Scenario scenario;
  std::array<double, kMultiVariantCount> rates;  // medians, decisions (requests) per second
  double cost_ratio;                // one / two: what two limits cost over one (target <= 1.3)
  double over_parts;                // cost of two / (cost of one + cost of second)
  double multi_of_one;              // one / one_multi: the multi-decision path on one item
  double min_allowed_pct;           // the lowest share allowed in any run
  std::vector<double> cost_ratios;  // each round's
};

int MeasureMulti(int rounds, double seconds, const std::string& markdown_path,
                 const std::string& csv_path) {
  constexpr std::size_t kKeys = 100'000;
  const std::vector<std::string> keys = cli::MakeKeys(kKeys);
  const Policy first = *Policy::Parse(kMultiFirst);
  const Policy second = *Policy::Parse(kMultiSecond);
  constexpr int kSlices = 10;
  const auto duration =
      std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9 / kSlices));
  const Scenario scenarios[] = {{"uniform, 1 thread", 0, 1}, {"uniform, 2 threads", 0, 2}};
  std::vector<MultiResult> results;
  for (const Scenario& sc : scenarios) {
    std::vector<KeySequence> sequences;
    for (int t = 0; t < sc.threads; ++t) sequences.emplace_back(kKeys, sc.zipf, 1000 + t);
    std::array<Limiter, kMultiVariantCount> limiters = {
        Limiter(std::make_unique<MemoryStore>()), Limiter(std::make_unique<MemoryStore>()),
        Limiter(std::make_unique<MemoryStore>()), Limiter(std::make_unique<MemoryStore>())};
    double min_allowed = 1;
    // One timed loop of `decide(key, items)` (true: allowed): its rate, with the share
    // allowed noted in min_allowed. The items are built once per thread; each request
    // only points them at its key, as a caller holding its limits would.
    const auto measure = [&](auto decide) {
      std::atomic<std::uint64_t> allowed{0};
      const cli::LoopResult result =
          cli::RunTimed(sc.threads, duration, [&](int t, const std::atomic<bool>& stop) {
            std::array<CheckItem, 2> items = {CheckItem{{}, first, 1, {}, false},
                                              CheckItem{{}, second, 1, {}, false}};
            std::uint64_t i = 0, admitted = 0;
            for (; (i & 63) != 0 || !stop.load(std::memory_order_relaxed); ++i) {
              admitted += decide(std::string_view(keys[sequences[t][i]]), items);
            }
            allowed += admitted;
            return i;
          });
      min_allowed = std::min(min_allowed, static_cast<double>(allowed) / result.operations);
      return result.operations / result.seconds;
    };
    using Items = std::array<CheckItem, 2>;
    const auto run = [&](std::size_t v) {
      Limiter& limiter = limiters[v];
      switch (v) {
        case 0:
          return measure(
              [&](std::string_view key, Items&) { return limiter.Check(key, first)->allowed; });
        case 1:
          return measure([&](std::string_view key, Items& items) {
            items[0].key = key;
            return limiter.CheckAll(std::span<const CheckItem>(items.data(), 1))->allowed;
          });
        case 2:
          return measure(
              [&](std::string_view key, Items&) { return limiter.Check(key, second)->allowed; });
        default:
          return measure([&](std::string_view key, Items& items) {
            items[0].key = items[1].key = key;
            return limiter.CheckAll(items)->allowed;
          });
      }
    };
    for (std::size_t v = 0; v < kMultiVariantCount; ++v) run(v);  // warm-up: keys inserted
    std::array<std::vector<double>, kMultiVariantCount> rates;
    std::vector<double> cost_ratios, over_parts, multi_of_one;
    for (int r = 0; r < rounds; ++r) {
      // A round is kSlices turns of every variant (order reversed every other turn), each
      // turn 1/kSlices of the round's time: the variants share the machine's slow and fast
      // moments (a shared VM's rate drifts by tens of % over seconds), so the ratios taken
      // in a round compare like with like. Equal turns: the round's rate is their mean.
      std::array<double, kMultiVariantCount> got{};
      for (int s = 0; s < kSlices; ++s) {
        for (std::size_t k = 0; k < kMultiVariantCount; ++k) {
          const std::size_t v = s % 2 == 0 ? k : kMultiVariantCount - 1 - k;
          got[v] += run(v) / kSlices;
        }
      }
      for (std::size_t v = 0; v < kMultiVariantCount; ++v) rates[v].push_back(got[v]);
      cost_ratios.push_back(got[0] / got[3]);
      over_parts.push_back((1 / got[3]) / (1 / got[0] + 1 / got[2]));
      multi_of_one.push_back(got[0] / got[1]);
    }
    MultiResult result{sc,
                       {},
                       Median(cost_ratios),
                       Median(over_parts),
                       Median(multi_of_one),
                       min_allowed * 100,
                       cost_ratios};
    for (std::size_t v = 0; v < kMultiVariantCount; ++v) result.rates[v] = Median(rates[v]);
    results.push_back(result);
    fmt::print(stderr,
               "  {:<20} one {:>5.2f} M/s  one via CheckAll {:>5.2f} M/s  second alone {:>5.2f} "
               "M/s  two {:>5.2f} M/s  cost ratio {:.2f}  over the parts {:.2f}  allowed >= "
               "{:.1f}%\n",
               sc.name, result.rates[0] / 1e6, result.rates[1] / 1e6, result.rates[2] / 1e6,
               result.rates[3] / 1e6, result.cost_ratio, result.over_parts, result.min_allowed_pct);
    if (min_allowed < 0.99) {
      fmt::print(stderr,
                 "memory_bench --multi: only {:.1f}% allowed; the limits were meant to "
                 "admit every decision\n",
                 min_allowed * 100);
      return 1;
    }
  }

  std::string md = fmt::format(
      "### Several limits in one decision: memory:// ({}, 100,000 keys)\n\n"
      "Through the public API, untimed loops as in the baseline comparison: one limit, "
      "`Limiter::Check(key, {})`, against two, `Limiter::CheckAll` over `{}` and `{}` "
      "(all or nothing, one decision time) on the same key; also that first limit as a "
      "multi-decision of one item (`CheckAll`, the cost of the multi-decision path alone) "
      "and the second limit on its own (`Check`). Each loop has a store of its own; all four "
      "take turns within each round (ten turns of a tenth of the round each, order reversed "
      "every other turn); medians of {} rounds of {:.1f} s per loop. Every decision admits (the "
      "rates stay far under both limits), so "
      "every item is written. Cost ratio = one-limit decisions/s over two-limit decisions/s, "
      "taken in each round. Target: cost ratio <= 1.3. \"Over the parts\" = the two-limit "
      "decision's time over the time of the two limits decided one by one with `Check`: "
      "above 1 is what deciding them together adds.\n\n"
      "| keys | one limit | one limit via CheckAll | second limit alone | two limits | "
      "cost ratio, each round | cost ratio | over the parts | CheckAll of one / Check |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      std::string(kMultiFirst) + " + " + kMultiSecond, kMultiFirst, kMultiFirst, kMultiSecond,
      rounds, seconds);
  for (const MultiResult& r : results) {
    md += fmt::format(
        "| {} | {:.2f} M | {:.2f} M | {:.2f} M | {:.2f} M | {:.2f} | **{:.2f}** | "
        "{:.2f} | {:.2f} |\n",
        r.scenario.name, r.rates[0] / 1e6, r.rates[1] / 1e6, r.rates[2] / 1e6, r.rates[3] / 1e6,
        fmt::join(r.cost_ratios, ", "), r.cost_ratio, r.over_parts, r.multi_of_one);
  }
  fmt::print("{}", md);
  if (!markdown_path.empty()) std::ofstream(markdown_path) << md;
  if (!csv_path.empty()) {
    std::ofstream csv(csv_path);
    csv << "keys,threads,first,second,one_per_sec,one_via_checkall_per_sec,second_alone_per_sec,"
           "two_per_sec,cost_ratio,two_over_parts,checkall_of_one_over_check,min_allowed_pct,"
           "cost_ratio_each_round\n";
    for (const MultiResult& r : results) {
      csv << fmt::format(
          "100000 uniform,{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.4f},{:.4f},{:.4f},"
          "{:.2f},{:.4f}\n",
          r.scenario.threads, kMultiFirst, kMultiSecond, r.rates[0], r.rates[1], r.rates[2],
          r.rates[3], r.cost_ratio, r.over_parts, r.multi_of_one, r.min_allowed_pct,
          fmt::join(r.cost_ratios, " "));
    }
  }
  return 0;
}

// --profile: the comparison's loop on one thread for a fixed number of decisions, after one
// pass over every key (so the counted decisions find their keys, as the timed rounds do).
// No clock but the decisions' own: under callgrind a timed loop would count the timer.
// Under callgrind a decision takes ~50 times as long, so the rarer keys would expire
// between their decisions (a gcra key lives about a second after its last one) and the
// count would be of expiry and reinsertion, which the timed rounds hardly see:
// --time-scale 0.02 runs floodgate's store on a clock 50 times slower (the store's clock
// option: the same clock read, through a std::function). The baseline never expires.
int Profile(const std::string& side, double zipf, std::uint64_t decisions, double time_scale) {
  constexpr std::size_t kKeys = 100'000;
  const std::vector<std::string> keys = cli::MakeKeys(kKeys);
  const KeySequence sequence(kKeys, zipf, 1000);
  const Policy gcra = *Policy::Parse("gcra:1000/1s");
  BaselineMap baseline;
  MemoryStoreOptions options;
  if (time_scale != 1) {
    options.clock = [start = SystemNow(), time_scale] {
      const auto elapsed = static_cast<double>((SystemNow() - start).count());
      return start + std::chrono::microseconds(static_cast<std::int64_t>(elapsed * time_scale));
    };
  }
  Limiter limiter(std::make_unique<MemoryStore>(std::move(options)));
  const auto run = [&](auto decide) {
    std::uint64_t sink = 0;
    for (const std::string& key : keys) sink += decide(key);
    for (std::uint64_t i = 0; i < decisions; ++i) sink += decide(keys[sequence[i]]);
    return sink;
  };
  const PreparedPolicy prepared = *PreparedPolicy::Prepare(gcra);
  const std::uint64_t sink =
      side == "baseline"
          ? run([&](const std::string& key) { return std::uint64_t{baseline.Decide(key)}; })
      : side == "prepared"
          ? run([&](const std::string& key) {
              return static_cast<std::uint64_t>(limiter.Check(key, prepared)->remaining);
            })
          : run([&](const std::string& key) {
              return static_cast<std::uint64_t>(limiter.Check(key, gcra)->remaining);
            });
  fmt::print("{} {} decisions, zipf {}: sink {}\n", side, decisions, zipf, sink);
  return 0;
}

}  // namespace
}  // namespace floodgate::bench

int main(int argc, char** argv) {
  using namespace floodgate;
  using namespace floodgate::bench;
  int rounds = 5;
  double seconds = 0.4;
  std::string markdown_path, csv_path;
  std::size_t rss_keys = 1'000'000;
  std::size_t rss_key_width = 0;
  std::string rss_policy;
  bool multi = false;
  std::string profile_side;
  double profile_zipf = 0;
  std::uint64_t profile_decisions = 1'000'000;
  double profile_time_scale = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--rounds")
      rounds = std::stoi(next());
    else if (arg == "--seconds")
      seconds = std::stod(next());
    else if (arg == "--markdown")
      markdown_path = next();
    else if (arg == "--csv")
      csv_path = next();
    else if (arg == "--multi")
      multi = true;
    else if (arg == "--rss")
      rss_policy = next();
    else if (arg == "--keys")
      rss_keys = std::stoul(next());
    else if (arg == "--key-bytes")
      rss_key_width = std::stoul(next());
    else if (arg == "--profile")
      profile_side = next();
    else if (arg == "--zipf")
      profile_zipf = std::stod(next());
    else if (arg == "--decisions")
      profile_decisions = std::stoull(next());
    else if (arg == "--time-scale")
      profile_time_scale = std::stod(next());
    else {
      fmt::print(stderr, "unknown argument {}\n", arg);
      return 2;
    }
  }
  if (!rss_policy.empty()) return MeasureRss(rss_policy, rss_keys, rss_key_width);
  if (!profile_side.empty()) {
    if (profile_side != "floodgate" && profile_side != "prepared" && profile_side != "baseline") {
      fmt::print(stderr, "--profile takes floodgate, prepared or baseline, got {}\n", profile_side);
      return 2;
    }
    return Profile(profile_side, profile_zipf, profile_decisions, profile_time_scale);
  }
  if (multi) return MeasureMulti(rounds, seconds, markdown_path, csv_path);

  constexpr std::size_t kKeys = 100'000;
  const std::vector<std::string> keys = cli::MakeKeys(kKeys);
  const Policy gcra = *Policy::Parse("gcra:1000/1s");
  const PreparedPolicy prepared = *PreparedPolicy::Prepare(gcra);
  const auto duration = std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));

  const Scenario scenarios[] = {{"uniform, 1 thread", 0, 1},
                                {"uniform, 2 threads", 0, 2},
                                {"zipf 1.1, 1 thread", 1.1, 1},
                                {"zipf 1.1, 2 threads", 1.1, 2}};
  std::vector<ScenarioResult> results;
  for (const Scenario& sc : scenarios) {
    std::vector<KeySequence> sequences;
    for (int t = 0; t < sc.threads; ++t) sequences.emplace_back(kKeys, sc.zipf, 1000 + t);
    BaselineMap baseline;
    Limiter limiter(std::make_unique<MemoryStore>());
    // Its own store: each loop finds every key as warm as the baseline's map finds its own.
    Limiter per_request(std::make_unique<MemoryStore>());
    const auto run_baseline = [&] {
      return cli::RunTimed(sc.threads, duration, [&](int t, const std::atomic<bool>& stop) {
        std::uint64_t i = 0, sink = 0;
        for (; (i & 63) != 0 || !stop.load(std::memory_order_relaxed); ++i) {
          sink += baseline.Decide(keys[sequences[t][i]]);
        }
        if (sink == 42) std::fputc(' ', stderr);  // keep the work observable
        return i;
      });
    };
    const auto run_floodgate = [&](Limiter& into, const auto& policy) {
      return cli::RunTimed(sc.threads, duration, [&](int t, const std::atomic<bool>& stop) {
        std::uint64_t i = 0, sink = 0;
        for (; (i & 63) != 0 || !stop.load(std::memory_order_relaxed); ++i) {
          sink += into.Check(keys[sequences[t][i]], policy)->remaining;
        }
        if (sink == 42) std::fputc(' ', stderr);
        return i;
      });
    };
    const auto rate = [](const cli::LoopResult& loop) { return loop.operations / loop.seconds; };
    // Three loops a round, so each ratio is taken within one round, against the baseline
    // reading next to it.
    const std::function<double()> loops[] = {
        [&] { return rate(run_baseline()); },
        [&] { return rate(run_floodgate(limiter, prepared)); },
        [&] { return rate(run_floodgate(per_request, gcra)); }};
    for (const auto& loop : loops) loop();  // warm-up: every key inserted, caches settled
    std::vector<double> base_rates, fg_rates, ratios, per_request_rates, per_request_ratios;
    for (int r = 0; r < rounds; ++r) {
      // Each round starts one loop further on (0 1 2, 1 2 0, 2 0 1, ...): every loop follows
      // each other loop as often, and none follows itself, whose caches would still be warm
      // (reversing the order every other round let the outer loops run twice in a row).
      double got[3];
      for (int k = 0; k < 3; ++k) {
        const int which = (r + k) % 3;
        got[which] = loops[which]();
      }
      base_rates.push_back(got[0]);
      fg_rates.push_back(got[1]);
      ratios.push_back(got[1] / got[0]);
      per_request_rates.push_back(got[2]);
      per_request_ratios.push_back(got[2] / got[0]);
    }
    results.push_back({sc, Median(base_rates), Median(fg_rates), Median(ratios),
                       Median(per_request_rates), Median(per_request_ratios)});
    const ScenarioResult& got = results.back();
    fmt::print(stderr,
               "  {:<22} baseline {:>6.2f} M/s  prepared {:>6.2f} M/s  ratio {:.2f}  per-request "
               "policy {:>6.2f} M/s  ratio {:.2f}\n",
               sc.name, got.baseline_rate / 1e6, got.floodgate_rate / 1e6, got.ratio,
               got.per_request_rate / 1e6, got.per_request_ratio);
  }

  // Memory per key: one fresh child process per policy, so allocations do not mix.
  // Short keys (`user:N`, stored inline) and 32-byte keys (API-key sized, in the arena).
  const std::pair<const char*, std::size_t> rss_cases[] = {
      {"gcra:100/1s", 0},
      {"token_bucket:100/1s", 0},
      {"token_bucket:100/1s,refill=interval", 0},
      {"fixed_window:100/1s", 0},
      {"sliding_window:100/1s", 0},
      {"sliding_log:100/1s", 0},
      {"gcra:100/1s", 32},
      {"sliding_window:100/1s", 32}};
  struct Rss {
    std::string policy;
    double per_key, key_bytes;
  };
  std::vector<Rss> rss;
  for (const auto& [policy, key_width] : rss_cases) {
    const std::string command = fmt::format("/proc/{}/exe --rss '{}' --keys {} --key-bytes {}",
                                            getpid(), policy, rss_keys, key_width);
    std::FILE* pipe = popen(command.c_str(), "r");
    char line[256] = {};
    if (pipe == nullptr || std::fgets(line, sizeof line, pipe) == nullptr) {
      fmt::print(stderr, "memory measurement failed for {}\n", policy);
      return 1;
    }
    pclose(pipe);
    char name[128];
    double per_key = 0, key_bytes = 0;
    std::sscanf(line, "%127s %lf %lf", name, &per_key, &key_bytes);
    rss.push_back({policy, per_key, key_bytes});
    fmt::print(stderr, "  {:<40} {:>6.1f} bytes/key (keys average {:.1f} bytes)\n", policy, per_key,
               key_bytes);
  }

  std::string md = fmt::format(
      "### memory:// against the bare baseline map (gcra, 100,000 keys)\n\n"
      "The baseline (bench/baseline_map.cc) is the fastest bare loop we could write for a "
      "gcra decision: the key hashed once, one of 256 shards taken with a spin lock (an "
      "atomic exchange in, a plain store out), find-or-insert in an abseil "
      "`flat_hash_map<std::string, int64_t>`, the clock read, tat compared with the burst "
      "tolerance and stored; no policy object, validation, expiry or bound. floodgate runs "
      "through its public API in the same loop, returning `absl::StatusOr<Decision>`: "
      "`Limiter::Check(key, prepared)` under a `PreparedPolicy` (checked once, as the "
      "baseline's policy is fixed in its code), and `Limiter::Check(key, policy)`, which "
      "checks and copies the policy on every decision; each on a store of its own. Neither "
      "side times single decisions. Median of {} rounds of {:.1f} s each; each ratio is "
      "taken within one round, the three loops back to back (each round starting one loop "
      "further on), so machine noise cancels. Target: prepared ratio >= 0.90 (issue 34).\n\n"
      "| keys | baseline decisions/s | floodgate, prepared | ratio | floodgate, policy per "
      "request | ratio |\n|---|---:|---:|---:|---:|---:|\n",
      rounds, seconds);
  for (const auto& r : results) {
    md += fmt::format("| {} | {:.2f} M | {:.2f} M | **{:.2f}** | {:.2f} M | {:.2f} |\n",
                      r.scenario.name, r.baseline_rate / 1e6, r.floodgate_rate / 1e6, r.ratio,
                      r.per_request_rate / 1e6, r.per_request_ratio);
  }
  md += fmt::format(
      "\n### Resident memory per key ({} keys, one fresh process each)\n\n"
      "Target: <= 64 bytes of state per key plus the key's bytes (gcra, token_bucket, "
      "fixed_window, sliding_window). Keys of up to 13 bytes are stored inline in the "
      "entry, longer ones in a per-shard arena.\n\n"
      "| policy | key bytes | RSS growth per key | minus key bytes |\n|---|---:|---:|---:|\n",
      rss_keys);
  for (const auto& r : rss) {
    md += fmt::format("| `{}` | {:.1f} | {:.1f} B | {:.1f} B |\n", r.policy, r.key_bytes, r.per_key,
                      r.per_key - r.key_bytes);
  }
  fmt::print("{}", md);
  if (!markdown_path.empty()) std::ofstream(markdown_path) << md;
  if (!csv_path.empty()) {
    // Scenario names and policies hold commas ("uniform, 1 thread", "refill=interval"):
    // quoted as RFC 4180 says, so any CSV reader keeps the columns.
    const auto quoted = [](std::string_view text) {
      std::string out = "\"";
      for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
      return out + "\"";
    };
    std::ofstream csv(csv_path);
    csv << "kind,name,baseline_per_sec,floodgate_per_sec,ratio,bytes_per_key,key_bytes,"
           "per_request_per_sec,per_request_ratio\n";
    for (const auto& r : results) {
      csv << fmt::format("throughput,{},{:.0f},{:.0f},{:.4f},,,{:.0f},{:.4f}\n",
                         quoted(r.scenario.name), r.baseline_rate, r.floodgate_rate, r.ratio,
                         r.per_request_rate, r.per_request_ratio);
    }
    for (const auto& r : rss) {
      csv << fmt::format("memory,{},,,,{:.1f},{:.1f},,\n", quoted(r.policy), r.per_key,
                         r.key_bytes);
    }
  }
  return 0;
}
