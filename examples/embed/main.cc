// Limit a login endpoint to 3 attempts per user per 15 minutes, in process.
#include <floodgate/floodgate.h>

#include <cstdio>

int main() {
  auto limiter = floodgate::Limiter::Open("memory://");
  auto policy = floodgate::Policy::Parse("sliding_log:3/15m");
  if (!limiter.ok() || !policy.ok()) return 1;

  int allowed = 0;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    auto decision = limiter->Check("login:alice", *policy);
    if (!decision.ok()) return 1;
    std::printf("attempt %d: %s (remaining %lld, retry in %lld us)\n", attempt,
                decision->allowed ? "allowed" : "denied",
                static_cast<long long>(decision->remaining),
                static_cast<long long>(decision->retry_after.count()));
    allowed += decision->allowed;
  }
  std::printf("allowed %d of 5\n", allowed);
  return allowed == 3 ? 0 : 1;
}
