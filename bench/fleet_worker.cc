// make bench, fleet part (bench/fleet_bench.py): one process of a worker fleet sharing one
// quota, waiting for its slots with Limiter::WaitAsync (Wait's form with no thread per
// waiter: at 3x the rate, a process holds about a second of its share waiting at once).
//
// From --start (Unix µs) for --seconds, offers --rate requests a second, open loop (a late
// tick catches up, so the offered load holds on a loaded machine), each asking the store
// once and proceeding when its delay has passed. Writes "offered_us proceed_us" per admitted
// request (Unix µs, the system clock: the processes of one machine share it) to --out, and
// {"offered", "admitted", "denied", "errors"} to stdout.
#include <floodgate/floodgate.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::system_clock;

std::int64_t UnixMicros(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// What the callbacks record, from the limiter's timer thread or the store's I/O thread.
class Tally {
 public:
  void Answered(std::int64_t offered_us, const absl::StatusOr<floodgate::Decision>& decision) {
    const std::int64_t proceed_us = UnixMicros(Clock::now());
    std::lock_guard lock(mutex_);
    if (!decision.ok()) {
      ++errors_;
    } else if (decision->allowed) {
      proceeds_.emplace_back(offered_us, proceed_us);
    } else {
      ++denied_;
    }
    ++answered_;
    changed_.notify_all();
  }

  // True once `offered` requests are answered, false at `until` (a guard, never expected).
  bool AwaitAnswers(std::int64_t offered, Clock::time_point until) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, until, [&] { return answered_ == offered; });
  }

  // Called once every request is answered.
  void Write(std::ofstream& out, std::int64_t offered) const {
    std::lock_guard lock(mutex_);
    for (const auto& [offered_us, proceed_us] : proceeds_)
      out << offered_us << ' ' << proceed_us << '\n';
    fmt::print("{{\"offered\": {}, \"admitted\": {}, \"denied\": {}, \"errors\": {}}}\n", offered,
               proceeds_.size(), denied_, errors_);
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<std::int64_t, std::int64_t>> proceeds_;
  std::int64_t denied_ = 0, errors_ = 0, answered_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One process of a throttled fleet: Limiter::WaitAsync on a shared key"};
  std::string store_url, policy_text, key = "fleet", out_path;
  double rate = 750, seconds = 10;
  std::int64_t start_us = 0;
  app.add_option("--store", store_url)->required();
  app.add_option("--policy", policy_text)->required();
  app.add_option("--key", key);
  app.add_option("--rate", rate, "requests offered a second");
  app.add_option("--seconds", seconds);
  app.add_option("--start", start_us, "Unix µs at which to begin offering")->required();
  app.add_option("--out", out_path)->required();
  CLI11_PARSE(app, argc, argv);

  auto policy = floodgate::Policy::Parse(policy_text);
  auto limiter = floodgate::Limiter::Open(store_url);
  if (!policy.ok() || !limiter.ok()) {
    fmt::print(stderr, "fleet_worker: {}\n",
               (!policy.ok() ? policy.status() : limiter.status()).ToString());
    return 2;
  }
  std::ofstream out(out_path);
  if (!out) {
    fmt::print(stderr, "fleet_worker: cannot write {}\n", out_path);
    return 2;
  }

  Tally tally;
  const auto start = Clock::time_point(std::chrono::microseconds(start_us));
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / rate));
  const auto total = static_cast<std::int64_t>(rate * seconds);
  for (std::int64_t i = 0; i < total; ++i) {
    std::this_thread::sleep_until(start + i * period);
    const std::int64_t offered_us = UnixMicros(Clock::now());
    // The deadline lies past delay=: the policy's delay bounds the wait.
    limiter->WaitAsync(key, *policy, std::chrono::steady_clock::now() + std::chrono::seconds(2), 1,
                       [&tally, offered_us](absl::StatusOr<floodgate::Decision> decision) {
                         tally.Answered(offered_us, decision);
                       });
  }
  // Every wait ends within delay= (the store's timeout bounds each answer); 30 s is a guard.
  if (!tally.AwaitAnswers(total, Clock::now() + std::chrono::seconds(30))) {
    fmt::print(stderr, "fleet_worker: requests still unanswered 30 s after the last\n");
    return 1;
  }
  tally.Write(out, total);
  return 0;
}
