// make bench, soak part: memory:// under 10 minutes of mixed traffic over 10 million keys.
//
// The store keeps its default bound (max_keys = 1,000,000). Two threads decide as fast as they can:
// every algorithm (chosen by key), costs 0 to 3, keys drawn so that most are seen a few times and
// the set never stops growing past the bound. Every 5 s it samples decisions/s, RSS, keys held,
// evictions and expiries.
//
// Fails (exit 1) when RSS passes the bound's budget, when throughput in the last minute
// falls below 80% of the second minute's (after warm-up), or when evictions never move.
// Writes the samples as CSV (--csv) and a Markdown summary (--markdown).
#include <floodgate/memory_store.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

namespace {

std::int64_t RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

struct Sample {
  double seconds;
  double decisions_per_sec;
  std::int64_t rss_kib;
  std::uint64_t keys, evictions, expired;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace floodgate;
  CLI::App app{"Soak: memory:// under mixed traffic over many distinct keys"};
  double seconds = 600;
  std::uint64_t distinct = 10'000'000;
  std::size_t max_keys = 1'000'000;
  int threads = 2;
  std::string csv_path, md_path;
  app.add_option("--seconds", seconds);
  app.add_option("--keys", distinct, "distinct keys");
  app.add_option("--max-keys", max_keys, "the store's bound");
  app.add_option("--threads", threads);
  app.add_option("--csv", csv_path);
  app.add_option("--markdown", md_path);
  CLI11_PARSE(app, argc, argv);

  MemoryStoreOptions options;
  options.max_keys = max_keys;
  MemoryStore store(options);
  // Every algorithm; windows short enough that keys expire as well as get evicted.
  const std::vector<Policy> policies = {*Policy::Parse("gcra:10/1s"),
                                        *Policy::Parse("token_bucket:100/1m"),
                                        *Policy::Parse("token_bucket:20/10s,refill=interval"),
                                        *Policy::Parse("sliding_log:8/30s"),
                                        *Policy::Parse("sliding_window:50/1m"),
                                        *Policy::Parse("fixed_window:5/5s")};
  // The budget: what the bound allows at the size targets (64 B of state per key plus
  // the key, x2 for the index's and allocator's slack), plus the sliding logs' entries
  // (8 per key at most), plus the process's base.
  const std::int64_t base_kib = RssKib();
  const std::int64_t budget_kib =
      base_kib + static_cast<std::int64_t>(max_keys * (2 * (64 + 16) + 8 * 8 / 6) / 1024);

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> decisions{0};
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 random(0x5eed + t);
      // Mostly recent keys (a sliding population), some from anywhere: the working set
      // keeps moving through all `distinct` keys and never fits under the bound.
      std::uint64_t cursor = t * 7919;
      char key[24];
      std::uint64_t local = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::uint64_t r = random();
        cursor = (cursor + 1) % distinct;
        const std::uint64_t id =
            (r & 7) == 0 ? (r >> 8) % distinct : (cursor + (r >> 8) % 50'000) % distinct;
        const int n = fmt::format_to_n(key, sizeof key, "u{}", id).size;
        const Policy& policy = policies[id % policies.size()];
        (void)store.Decide(
            {std::string_view(key, n), policy, static_cast<std::int64_t>(r >> 62), std::nullopt});
        if (++local == 1024) {
          decisions.fetch_add(local, std::memory_order_relaxed);
          local = 0;
        }
      }
    });
  }

  std::vector<Sample> samples;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t last_decisions = 0;
  auto last = start;
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(5));  // the sampling period
    const auto now = std::chrono::steady_clock::now();
    const std::uint64_t d = decisions.load();
    const StoreStats stats = store.Stats();
    samples.push_back({std::chrono::duration<double>(now - start).count(),
                       (d - last_decisions) / std::chrono::duration<double>(now - last).count(),
                       RssKib(), stats.keys, stats.evictions, stats.expired});
    const Sample& s = samples.back();
    std::cerr << fmt::format(
        "  {:5.0f} s  {:6.2f} M decisions/s  RSS {:6.1f} MiB  keys {:>9}  "
        "evictions {:>10}  expired {:>10}\n",
        s.seconds, s.decisions_per_sec / 1e6, s.rss_kib / 1024.0, s.keys, s.evictions, s.expired);
    last_decisions = d;
    last = now;
    if (s.seconds >= seconds) break;
  }
  stop = true;
  workers.clear();

  // Second minute (warm: the store is full) against the last minute.
  const auto mean_between = [&](double from, double to) {
    double sum = 0;
    int n = 0;
    for (const Sample& s : samples) {
      if (s.seconds > from && s.seconds <= to) sum += s.decisions_per_sec, ++n;
    }
    return n ? sum / n : 0.0;
  };
  const double total = samples.back().seconds;
  const double early = mean_between(std::min(60.0, total / 5), std::min(120.0, 2 * total / 5));
  const double late = mean_between(total - std::min(60.0, total / 5), total);
  std::int64_t peak_rss = 0;
  for (const Sample& s : samples) peak_rss = std::max(peak_rss, s.rss_kib);
  const bool rss_ok = peak_rss <= budget_kib;
  const bool throughput_ok = late >= 0.8 * early;
  const bool evictions_ok = samples.back().evictions > samples[samples.size() / 2].evictions;

  std::string md = fmt::format(
      "### Soak ({:.0f} s, memory://, max_keys {})\n\n"
      "{} threads of mixed traffic (all six policies, costs 0-3) over {} distinct keys: "
      "{:.1f} M decisions in all. Peak RSS {:.1f} MiB (budget {:.1f} MiB: the bound at 2 x "
      "(64 B + key) per key, plus sliding-log entries, plus the process) {}; throughput "
      "{:.2f} M/s in the second minute, {:.2f} M/s in the last ({:.2f}x) {}; evictions "
      "{} and expiries {} at the end {}. RSS and throughput over time: "
      "![soak](soak.png)\n",
      total, max_keys, threads, distinct, decisions.load() / 1e6, peak_rss / 1024.0,
      budget_kib / 1024.0, rss_ok ? "(within)" : "(**over**)", early / 1e6, late / 1e6,
      late / early, throughput_ok ? "(no decay)" : "(**decayed**)", samples.back().evictions,
      samples.back().expired, evictions_ok ? "(still moving)" : "(**stuck**)");
  std::cout << md;
  if (!md_path.empty()) std::ofstream(md_path) << md;
  if (!csv_path.empty()) {
    std::ofstream csv(csv_path);
    csv << "seconds,decisions_per_sec,rss_kib,keys,evictions,expired\n";
    for (const Sample& s : samples) {
      csv << fmt::format("{:.1f},{:.0f},{},{},{},{}\n", s.seconds, s.decisions_per_sec, s.rss_kib,
                         s.keys, s.evictions, s.expired);
    }
  }
  return rss_ok && throughput_ok && evictions_ok ? 0 : 1;
}
