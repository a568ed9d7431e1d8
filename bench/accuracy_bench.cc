// make bench, accuracy part: each algorithm against the exact log, a racy limiter against ours.
//
// 1. On a bursty trace (clients idle for a while, then firing bursts), how far each
//    algorithm strays from the exact sliding log under the same limit: requests it
//    admitted that the log denied (over-admission), requests it denied that the log
//    admitted (under-admission), both in % of what the log admitted, and the most any
//    client got through in any window of the period (the log never exceeds the limit).
//    Every algorithm decides the same requests at the same explicit times on its own
//    memory:// store, so the figures are deterministic for a seed.
// 2. With --redis-port: 4 concurrent clients on one key of a real Redis, each trying
//    2,500 times against a limit of 1,000: a non-atomic read-modify-write limiter (read
//    the count, decide, write it back: the pattern of the first Go article in our
//    sources) against floodgate's atomic scripts (4 separate RedisStore clients).
//
// Writes a CSV (--csv) and a Markdown table (--markdown); medians over --rounds seeds.
#include <floodgate/memory_store.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

using std::chrono::microseconds;

struct Request {
  std::int64_t t_us;
  int client;
};

// Clients alternate between idle stretches (exponential, mean 20 s) and bursts
// (exponential length, mean 3 s) at a Poisson rate of 30/s: about three times the limit
// while bursting, nothing in between.
std::vector<Request> BurstyTrace(std::uint64_t seed, int clients, double seconds) {
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> idle(1.0 / 20.0), burst(1.0 / 3.0), gap(30.0);
  std::vector<Request> trace;
  for (int c = 0; c < clients; ++c) {
    double t = idle(random) / 2;
    while (t < seconds) {
      const double end = t + burst(random);
      for (t += gap(random); t < end && t < seconds; t += gap(random)) {
        trace.push_back({static_cast<std::int64_t>(t * 1e6), c});
      }
      t = end + idle(random);
    }
  }
  std::sort(trace.begin(), trace.end(),
            [](const Request& a, const Request& b) { return a.t_us < b.t_us; });
  return trace;
}

struct Accuracy {
  double over_pct = 0;      // admitted here, denied by the log, % of log admissions
  double under_pct = 0;     // denied here, admitted by the log, % of log admissions
  double worst_window = 0;  // most admitted in any period-long window / limit
  std::int64_t admitted = 0;
};

// Most requests admitted to one client inside any window of `period_us` (half-open).
std::int64_t WorstWindow(const std::vector<std::vector<std::int64_t>>& admitted_at,
                         std::int64_t period_us) {
  std::int64_t worst = 0;
  for (const auto& times : admitted_at) {
    std::size_t first = 0;
    for (std::size_t last = 0; last < times.size(); ++last) {
      while (times[last] - times[first] >= period_us) ++first;
      worst = std::max<std::int64_t>(worst, static_cast<std::int64_t>(last - first + 1));
    }
  }
  return worst;
}

std::vector<bool> Decide(const std::vector<Request>& trace, const Policy& policy, int clients,
                         std::vector<std::vector<std::int64_t>>& admitted_at) {
  MemoryStore store;
  constexpr std::int64_t kStart = 1'700'000'000'000'000;  // 2023, in µs
  std::vector<std::string> keys;
  for (int c = 0; c < clients; ++c) keys.push_back(fmt::format("client-{}", c));
  admitted_at.assign(clients, {});
  std::vector<bool> allowed;
  allowed.reserve(trace.size());
  for (const Request& r : trace) {
    auto d = store.Decide({keys[r.client], policy, 1, TimePoint(microseconds(kStart + r.t_us))});
    if (!d.ok()) {
      std::cerr << "accuracy_bench: " << d.status() << "\n";
      std::exit(1);
    }
    allowed.push_back(d->allowed);
    if (d->allowed) admitted_at[r.client].push_back(r.t_us);
  }
  return allowed;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// 4 clients x 2,500 tries at once on one key with a limit of 1,000; returns admissions.
std::int64_t NaiveReadModifyWrite(int port, const std::string& key) {
  std::atomic<std::int64_t> admitted{0};
  std::barrier start(4);
  std::vector<std::jthread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      redisContext* redis = redisConnect("127.0.0.1", port);
      if (redis == nullptr || redis->err != 0) std::exit(1);
      start.arrive_and_wait();
      for (int i = 0; i < 2500; ++i) {
        auto* reply = static_cast<redisReply*>(redisCommand(redis, "GET %s", key.c_str()));
        const long long count = reply->type == REDIS_REPLY_STRING ? std::atoll(reply->str) : 0;
        freeReplyObject(reply);
        if (count >= 1000) continue;
        freeReplyObject(redisCommand(redis, "SET %s %lld PX 3600000", key.c_str(), count + 1));
        ++admitted;
      }
      redisFree(redis);
    });
  }
  clients.clear();
  return admitted;
}

std::int64_t AtomicScripts(int port, const std::string& prefix) {
  const Policy policy = *Policy::Parse("sliding_log:1000/1h");
  std::vector<std::unique_ptr<RedisStore>> stores;
  for (int c = 0; c < 4; ++c) {
    auto options = RedisStoreOptions::FromUrl(
        fmt::format("redis://127.0.0.1:{}?timeout=5s&denial_cache=0us&prefix={}", port, prefix));
    auto store = RedisStore::Open(*options);
    if (!store.ok()) {
      std::cerr << "accuracy_bench: " << store.status() << "\n";
      std::exit(1);
    }
    stores.push_back(*std::move(store));
  }
  std::atomic<std::int64_t> admitted{0}, degraded{0};
  std::barrier start(4);
  std::vector<std::jthread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      start.arrive_and_wait();
      for (int i = 0; i < 2500; ++i) {
        auto d = stores[c]->Decide({"one-key", policy, 1, std::nullopt});
        if (!d.ok() || d->degraded) ++degraded;
        if (d.ok() && d->allowed && !d->degraded) ++admitted;
      }
    });
  }
  clients.clear();
  if (degraded > 0) {
    std::cerr << "accuracy_bench: Redis answers were degraded; the count proves nothing\n";
    std::exit(1);
  }
  return admitted;
}

}  // namespace
}  // namespace floodgate

int main(int argc, char** argv) {
  using namespace floodgate;
  CLI::App app{"Accuracy of the approximate algorithms, and of a non-atomic limiter"};
  int rounds = 3, redis_port = 0, clients = 500;
  double seconds = 300;
  std::string csv_path, md_path;
  app.add_option("--rounds", rounds, "seeds (medians are reported)");
  app.add_option("--clients", clients, "clients in the trace");
  app.add_option("--seconds", seconds, "length of the trace");
  app.add_option("--redis-port", redis_port, "a running redis-server for part 2");
  app.add_option("--csv", csv_path);
  app.add_option("--markdown", md_path);
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::pair<std::string, std::string>> algorithms = {
      {"sliding_log (exact)", "sliding_log:100/10s"}, {"sliding_window", "sliding_window:100/10s"},
      {"fixed_window", "fixed_window:100/10s"},       {"gcra", "gcra:100/10s"},
      {"token_bucket", "token_bucket:100/10s"},
  };
  const std::int64_t period_us = 10'000'000, limit = 100;
  std::map<std::string, std::vector<Accuracy>> runs;
  std::size_t requests = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto trace = BurstyTrace(1000 + round, clients, seconds);
    requests = trace.size();
    std::vector<std::vector<std::int64_t>> admitted_at;
    const std::vector<bool> exact =
        Decide(trace, *Policy::Parse(algorithms[0].second), clients, admitted_at);
    const auto exact_admitted = std::count(exact.begin(), exact.end(), true);
    for (const auto& [name, text] : algorithms) {
      const std::vector<bool> got = Decide(trace, *Policy::Parse(text), clients, admitted_at);
      Accuracy a;
      std::int64_t over = 0, under = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        over += got[i] && !exact[i];
        under += !got[i] && exact[i];
      }
      a.admitted = std::count(got.begin(), got.end(), true);
      a.over_pct = 100.0 * over / exact_admitted;
      a.under_pct = 100.0 * under / exact_admitted;
      a.worst_window = static_cast<double>(WorstWindow(admitted_at, period_us)) / limit;
      runs[name].push_back(a);
    }
  }

  std::vector<double> naive, atomic;
  if (redis_port > 0) {
    for (int round = 0; round < rounds; ++round) {
      naive.push_back(static_cast<double>(
          NaiveReadModifyWrite(redis_port, fmt::format("naive-{}-{}", ::getpid(), round))));
      atomic.push_back(static_cast<double>(
          AtomicScripts(redis_port, fmt::format("acc{}-{}:", ::getpid(), round))));
    }
  }

  std::string md = fmt::format(
      "### Accuracy ({} rounds, medians)\n\nA bursty trace: {} clients for {:.0f} s, each "
      "idle for ~20 s, then bursting for ~3 s at ~30 requests/s (about {} requests per "
      "round); every algorithm at 100 per 10 s (burst 100), decided at the same explicit "
      "times. Against the exact sliding log: requests admitted that it denied "
      "(over-admission) and denied that it admitted (under-admission), in % of what the log "
      "admitted; and the most one client got through in any 10 s window, as a multiple of "
      "the limit.\n\n"
      "| algorithm | admitted | over-admission | under-admission | worst 10 s window |\n"
      "|---|---:|---:|---:|---:|\n",
      rounds, clients, seconds, requests);
  std::string csv = "part,algorithm,admitted,over_pct,under_pct,worst_window_x_limit\n";
  for (const auto& [name, text] : algorithms) {
    std::vector<double> admitted, over, under, worst;
    for (const Accuracy& a : runs[name]) {
      admitted.push_back(static_cast<double>(a.admitted));
      over.push_back(a.over_pct);
      under.push_back(a.under_pct);
      worst.push_back(a.worst_window);
    }
    md += fmt::format("| {} | {:.0f} | {:.2f}% | {:.2f}% | {:.2f}x |\n", name, Median(admitted),
                      Median(over), Median(under), Median(worst));
    csv += fmt::format("trace,{},{:.0f},{:.4f},{:.4f},{:.4f}\n", name, Median(admitted),
                       Median(over), Median(under), Median(worst));
  }
  if (!naive.empty()) {
    md += fmt::format(
        "\nAtomicity: 4 concurrent clients x 2,500 tries on one Redis key, limit 1,000:\n\n"
        "| limiter | admitted | over-admission |\n|---|---:|---:|\n"
        "| read, decide, write back (non-atomic) | {:.0f} | {:.1f}% |\n"
        "| floodgate (one Lua script per decision) | {:.0f} | {:.1f}% |\n",
        Median(naive), 100.0 * (Median(naive) - 1000) / 1000, Median(atomic),
        100.0 * (Median(atomic) - 1000) / 1000);
    csv += fmt::format("atomicity,naive read-modify-write,{:.0f},{:.4f},0,0\n", Median(naive),
                       100.0 * (Median(naive) - 1000) / 1000);
    csv += fmt::format("atomicity,floodgate,{:.0f},{:.4f},0,0\n", Median(atomic),
                       100.0 * (Median(atomic) - 1000) / 1000);
  }
  std::cout << md;
  if (!csv_path.empty()) std::ofstream(csv_path) << csv;
  if (!md_path.empty()) std::ofstream(md_path) << md;
  return 0;
}
