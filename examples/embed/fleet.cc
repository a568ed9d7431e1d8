// A throttled worker fleet: workers sharing one upstream quota wait for their slot
// (delay=) instead of failing. Here 4 worker threads on memory://; give a redis:// URL
// and run the program several times at once to make the fleet span processes (the key's
// schedule lives in Redis, at its clock).
//   fleet_example [STORE_URL]
#include <floodgate/floodgate.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  auto limiter = floodgate::Limiter::Open(argc > 1 ? argv[1] : "memory://");
  // 100 calls a second to the upstream, bursts of 5, a caller waits up to 1 s for its slot.
  auto quota = floodgate::Policy::Parse("gcra:100/1s,burst=5,delay=1s");
  if (!limiter.ok() || !quota.ok()) return 1;

  constexpr int kWorkers = 4, kJobsEach = 10;
  std::atomic<int> called = 0, requeued = 0;
  std::vector<std::jthread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      for (int job = 0; job < kJobsEach; ++job) {
        // Asks once, sleeps the answer's delay, returns: the call may go now.
        auto slot = limiter->Wait("upstream-api", *quota, std::chrono::steady_clock::now() + 2s);
        if (slot.ok() && slot->allowed) {
          ++called;  // Call(job): at most 100 a second across the fleet
        } else {
          ++requeued;  // no slot within delay=: slot->retry_after says when to try again
        }
      }
    });
  }
  workers.clear();  // joins
  std::printf("fleet: called %d of %d, requeued %d\n", called.load(), kWorkers * kJobsEach,
              requeued.load());
  return called + requeued == kWorkers * kJobsEach ? 0 : 1;
}
