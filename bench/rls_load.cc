// A gRPC load generator for Envoy's rate limit service (RLS v3): `--concurrency` calls in
// flight over `--connections` HTTP/2 connections, each call's answer starting the next
// (gRPC's callback client API: no thread per call), until `--duration` has passed or
// `--requests` were sent. One descriptor per request, `--key` with a value out of
// `--values` (random), in `--domain`. Prints requests/s, p50/p99 and the answers' codes
// (JSON with --json), as bench/rls_bench.py reads them.
#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace pb = ::envoy::service::ratelimit::v3;
using Steady = std::chrono::steady_clock;

struct Options {
  std::string target = "127.0.0.1:8081";
  std::string domain = "bench";
  std::string key = "remote_address";
  int values = 100'000;
  int concurrency = 64;
  int connections = 4;
  double seconds = 5;
  std::int64_t requests = 0;  // 0: no bound but time
  bool json = false;
};

struct Totals {
  std::int64_t ok = 0;
  std::int64_t over_limit = 0;
  std::int64_t errors = 0;
  std::vector<std::int64_t> latencies_ns;
};

// Everything the calls share. The calls end by themselves (time or count), and the run
// waits for all of them before reading the totals.
class Load {
 public:
  explicit Load(const Options& options) : options_(options) {
    for (int i = 0; i < options.connections; ++i) {
      grpc::ChannelArguments args;
      // One connection per channel: channels would share one subchannel otherwise.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stubs_.push_back(pb::RateLimitService::NewStub(
          grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args)));
    }
  }

  Totals Run() {
    begin_ = Steady::now();
    end_ = begin_ + std::chrono::duration_cast<Steady::duration>(
                        std::chrono::duration<double>(options_.seconds));
    for (int i = 0; i < options_.concurrency; ++i) {
      slots_.push_back(std::make_unique<Slot>(*this, *stubs_[i % stubs_.size()], i));
    }
    running_ = options_.concurrency;
    for (auto& slot : slots_) slot->Next();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
    Totals totals;
    for (const auto& slot : slots_) {
      totals.ok += slot->totals.ok;
      totals.over_limit += slot->totals.over_limit;
      totals.errors += slot->totals.errors;
      totals.latencies_ns.insert(totals.latencies_ns.end(), slot->totals.latencies_ns.begin(),
                                 slot->totals.latencies_ns.end());
    }
    elapsed_ = last_answer_ - begin_;
    return totals;
  }
  Steady::duration elapsed() const { return elapsed_; }

 private:
  // One call in flight at a time; its answer starts the next.
  class Slot {
   public:
    Slot(Load& load, pb::RateLimitService::Stub& stub, int seed)
        : load_(load), stub_(stub), random_(static_cast<unsigned>(seed) * 7919u + 1) {}

    void Next() {
      const auto now = Steady::now();
      if (now >= load_.end_ ||
          (load_.options_.requests > 0 && load_.sent_.fetch_add(1) >= load_.options_.requests)) {
        return load_.Finished(now);
      }
      request_.Clear();
      request_.set_domain(load_.options_.domain);
      auto* entry = request_.add_descriptors()->add_entries();
      entry->set_key(load_.options_.key);
      entry->set_value(fmt::format(
          "c{}", std::uniform_int_distribution<int>(1, load_.options_.values)(random_)));
      response_.Clear();
      context_ = std::make_unique<grpc::ClientContext>();
      context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      sent_at_ = now;
      stub_.async()->ShouldRateLimit(context_.get(), &request_, &response_,
                                     [this](grpc::Status status) { Answered(status); });
    }

    Totals totals;

   private:
    void Answered(const grpc::Status& status) {
      totals.latencies_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - sent_at_).count());
      if (!status.ok()) {
        ++totals.errors;
      } else if (response_.overall_code() == pb::RateLimitResponse::OVER_LIMIT) {
        ++totals.over_limit;
      } else {
        ++totals.ok;
      }
      Next();
    }

    Load& load_;
    pb::RateLimitService::Stub& stub_;
    std::minstd_rand random_;
    pb::RateLimitRequest request_;
    pb::RateLimitResponse response_;
    std::unique_ptr<grpc::ClientContext> context_;
    Steady::time_point sent_at_;
  };

  void Finished(Steady::time_point now) {
    std::lock_guard lock(mutex_);
    last_answer_ = std::max(last_answer_, now);
    if (--running_ == 0) done_.notify_all();
  }

  const Options& options_;
  std::vector<std::unique_ptr<pb::RateLimitService::Stub>> stubs_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<std::int64_t> sent_{0};
  Steady::time_point begin_;
  Steady::time_point end_;
  Steady::time_point last_answer_;
  Steady::duration elapsed_{};
  std::mutex mutex_;
  std::condition_variable done_;
  int running_ = 0;
};

double PercentileUs(std::vector<std::int64_t>& ns, double p) {
  if (ns.empty()) return 0;
  const auto at = static_cast<std::size_t>(p * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(at), ns.end());
  return static_cast<double>(ns[at]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("gRPC load for Envoy's rate limit service (RLS v3)");
  app.add_option("--target", options.target, "HOST:PORT of the gRPC service");
  app.add_option("--domain", options.domain, "the RateLimitRequest's domain");
  app.add_option("--key", options.key, "the descriptor entry's key");
  app.add_option("--values", options.values, "distinct values (random c1..cN)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--concurrency", options.concurrency, "calls in flight")
      ->check(CLI::Range(1, 4096));
  app.add_option("--connections", options.connections, "HTTP/2 connections")
      ->check(CLI::Range(1, 256));
  app.add_option("--seconds", options.seconds, "how long to send")->check(CLI::Range(0.1, 600.0));
  app.add_option("--requests", options.requests, "at most this many requests (0: no bound)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1'000'000'000}));
  app.add_flag("--json", options.json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  Load load(options);
  Totals totals = load.Run();
  const double seconds = std::chrono::duration<double>(load.elapsed()).count();
  const auto answered = static_cast<double>(totals.ok + totals.over_limit);
  const double rps = seconds > 0 ? answered / seconds : 0;
  const double p50 = PercentileUs(totals.latencies_ns, 0.50);
  const double p99 = PercentileUs(totals.latencies_ns, 0.99);
  if (options.json) {
    fmt::print(R"({{"requests_per_sec": {:.1f}, "p50_us": {:.1f}, "p99_us": {:.1f}, "ok": {}, )"
               R"("over_limit": {}, "errors": {}, "seconds": {:.3f}}})"
               "\n",
               rps, p50, p99, totals.ok, totals.over_limit, totals.errors, seconds);
  } else {
    fmt::print("{:.0f} requests/s, p50 {:.0f} us, p99 {:.0f} us; OK {}, OVER_LIMIT {}, errors {}\n",
               rps, p50, p99, totals.ok, totals.over_limit, totals.errors);
  }
  return totals.errors == 0 ? 0 : 1;
}
