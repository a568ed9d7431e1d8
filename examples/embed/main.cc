// Embedding example: a login limit of 3 attempts per user per 15 minutes, in process.
//
// Then two stacked limits decided together, all or nothing, and a policy prepared once.
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

  // 2 per second and 5 per day for one API key: the burst denies the third request, and
  // that denial spends nothing of the daily limit.
  const floodgate::CheckItem items[] = {
      {"key:k1/burst", *floodgate::Policy::Parse("gcra:2/1s"), 1, "burst"},
      {"key:k1/daily", *floodgate::Policy::Parse("sliding_log:5/1d"), 1, "daily"}};
  int stacked = 0;
  for (int request = 1; request <= 4; ++request) {
    auto multi = limiter->CheckAll(items);
    if (!multi.ok()) return 1;
    stacked += multi->allowed;
  }
  auto daily = limiter->Check("key:k1/daily", items[1].policy, 0);  // a peek
  if (!daily.ok()) return 1;
  std::printf("stacked: allowed %d of 4, daily remaining %lld\n", stacked,
              static_cast<long long>(daily->remaining));

  // A limit decided on every request, its policy checked once (PreparedPolicy): 10 per
  // second with a burst of 2, three requests at one instant.
  auto per_user = floodgate::PreparedPolicy::Parse("gcra:10/1s,burst=2");
  if (!per_user.ok()) return 1;
  const floodgate::TimePoint now = floodgate::SystemNow();
  int prepared = 0;
  for (int request = 1; request <= 3; ++request) {
    auto decision = limiter->CheckAt(now, "user:bob", *per_user);
    if (!decision.ok()) return 1;
    prepared += decision->allowed;
  }
  std::printf("prepared: allowed %d of 3\n", prepared);
  return allowed == 3 && stacked == 2 && daily->remaining == 3 && prepared == 2 ? 0 : 1;
}
