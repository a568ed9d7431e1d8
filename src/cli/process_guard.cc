// A serving process's descriptor limit, and the watchdog of its shutdown.

#include "cli/process_guard.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stop_token>

namespace floodgate::cli {

void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("floodgate: cannot raise the file descriptor limit from {}", was);
  }
}

std::jthread ExitUnlessStoppedWithin(std::chrono::seconds limit, int exit_code) {
  return std::jthread([limit, exit_code](const std::stop_token& finished) {
    std::mutex mu;
    std::condition_variable_any wake;
    std::unique_lock lock(mu);
    // Woken only by `finished` (the predicate never holds) or by the time running out.
    wake.wait_for(lock, finished, limit, [] { return false; });
    if (finished.stop_requested()) return;
    spdlog::error(
        "floodgate: not stopped {} s after the signal to stop (a request is stuck); exiting",
        limit.count());
    spdlog::default_logger()->flush();
    std::_Exit(exit_code);
  });
}

}  // namespace floodgate::cli
