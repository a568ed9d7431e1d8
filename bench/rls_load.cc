// A gRPC load generator for Envoy's rate limit service (RLS v3), for bench/rls_bench.py.
//
// `--concurrency` calls in flight over `--connections` HTTP/2 connections, each call's answer
// starting the next (gRPC's completion-queue client API: no thread per call), until `--duration`
// has passed or `--requests` were sent. `--descriptors` descriptors per request (one by default),
// each `--key` with a value out of `--values` (random), in `--domain`. Prints requests/s, p50/p99
// and the answers' codes (JSON with --json), as bench/rls_bench.py reads them.
#include <absl/synchronization/mutex.h>
#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
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
  int descriptors = 1;
  int concurrency = 64;
  int connections = 4;
  int threads = 1;
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

// Everything the calls share. gRPC's completion-queue API, as gRPC's own benchmark client
// uses it: `--threads` threads each drain a completion queue of their own, and a call's
// answer, read on that thread, starts the slot's next call there (the callback API hands
// every answer to gRPC's executor threads instead: measured at 1.4-1.5x the client CPU
// per call, 28-31 us against 19-23 us, against the same server).
// The calls end by themselves (time or count); each thread ends when its slots have.
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
    for (int t = 0; t < options.threads; ++t)
      queues_.push_back(std::make_unique<grpc::CompletionQueue>());
  }

  Totals Run() {
    begin_ = Steady::now();
    end_ = begin_ + std::chrono::duration_cast<Steady::duration>(
                        std::chrono::duration<double>(options_.seconds));
    for (int i = 0; i < options_.concurrency; ++i) {
      slots_.push_back(std::make_unique<Slot>(*this, *stubs_[i % stubs_.size()],
                                              *queues_[i % queues_.size()], i));
    }
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < queues_.size(); ++t) {
      threads.emplace_back([this, t] {
        std::size_t running = 0;
        for (std::size_t i = t; i < slots_.size(); i += queues_.size()) {
          running += slots_[i]->Next() ? 1 : 0;
        }
        void* tag = nullptr;
        bool ok = false;
        while (running > 0 && queues_[t]->Next(&tag, &ok)) {
          running -= static_cast<Slot*>(tag)->Answered() ? 0 : 1;
        }
        queues_[t]->Shutdown();
        while (queues_[t]->Next(&tag, &ok)) {
        }
      });
    }
    for (auto& thread : threads) thread.join();
    Totals totals;
    for (const auto& slot : slots_) {
      totals.ok += slot->totals.ok;
      totals.over_limit += slot->totals.over_limit;
      totals.errors += slot->totals.errors;
      totals.latencies_ns.insert(totals.latencies_ns.end(), slot->totals.latencies_ns.begin(),
                                 slot->totals.latencies_ns.end());
      last_answer_ = std::max(last_answer_, slot->last_answer);
    }
    elapsed_ = last_answer_ - begin_;
    return totals;
  }
  Steady::duration elapsed() const { return elapsed_; }

 private:
  // One call in flight at a time; its answer starts the next.
  class Slot {
   public:
    Slot(Load& load, pb::RateLimitService::Stub& stub, grpc::CompletionQueue& queue, int seed)
        : load_(load),
          stub_(stub),
          queue_(queue),
          random_(static_cast<unsigned>(seed) * 7919u + 1) {}

    // Starts the next call; false when the run is over for this slot.
    bool Next() {
      const auto now = Steady::now();
      if (now >= load_.end_ ||
          (load_.options_.requests > 0 && load_.sent_.fetch_add(1) >= load_.options_.requests)) {
        last_answer = std::max(last_answer, now);
        return false;
      }
      request_.Clear();
      request_.set_domain(load_.options_.domain);
      for (int d = 0; d < load_.options_.descriptors; ++d) {
        auto* entry = request_.add_descriptors()->add_entries();
        entry->set_key(load_.options_.key);
        entry->set_value(fmt::format(
            "c{}", std::uniform_int_distribution<int>(1, load_.options_.values)(random_)));
      }
      response_.Clear();
      context_ = std::make_unique<grpc::ClientContext>();
      context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      sent_at_ = now;
      call_ = stub_.PrepareAsyncShouldRateLimit(context_.get(), request_, &queue_);
      call_->StartCall();
      call_->Finish(&response_, &status_, this);
      return true;
    }

    // The call's answer is in; starts the next one (false when there is none).
    bool Answered() {
      const auto now = Steady::now();
      totals.latencies_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent_at_).count());
      if (!status_.ok()) {
        ++totals.errors;
      } else if (response_.overall_code() == pb::RateLimitResponse::OVER_LIMIT) {
        ++totals.over_limit;
      } else {
        ++totals.ok;
      }
      last_answer = now;
      return Next();
    }

    Totals totals;
    Steady::time_point last_answer;

   private:
    Load& load_;
    pb::RateLimitService::Stub& stub_;
    grpc::CompletionQueue& queue_;
    std::minstd_rand random_;
    pb::RateLimitRequest request_;
    pb::RateLimitResponse response_;
    grpc::Status status_;
    std::unique_ptr<grpc::ClientContext> context_;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::RateLimitResponse>> call_;
    Steady::time_point sent_at_;
  };

  const Options& options_;
  std::vector<std::unique_ptr<pb::RateLimitService::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<std::int64_t> sent_{0};
  Steady::time_point begin_;
  Steady::time_point end_;
  Steady::time_point last_answer_;
  Steady::duration elapsed_{};
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
  app.add_option("--descriptors", options.descriptors, "descriptors per request")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--concurrency", options.concurrency, "calls in flight")
      ->check(CLI::Range(1, 4096));
  app.add_option("--connections", options.connections, "HTTP/2 connections")
      ->check(CLI::Range(1, 256));
  app.add_option("--threads", options.threads, "client threads, each with a completion queue")
      ->check(CLI::Range(1, 64));
  app.add_option("--seconds", options.seconds, "how long to send")->check(CLI::Range(0.1, 600.0));
  app.add_option("--requests", options.requests, "at most this many requests (0: no bound)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1'000'000'000}));
  app.add_flag("--json", options.json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  // As `floodgate serve` does: no lock-order tracking in Debian's (debug) abseil under gRPC.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

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
