#include <floodgate/limiter.h>

namespace floodgate {

absl::StatusOr<Limiter> Limiter::Open(std::string_view store_url) {
  auto store = OpenStore(store_url);
  if (!store.ok()) return store.status();
  return Limiter(*std::move(store));
}

Limiter::Limiter(std::unique_ptr<Store> store) : store_(std::move(store)) {}

absl::StatusOr<Decision> Limiter::Check(std::string_view key, const Policy& policy,
                                        std::int64_t cost) {
  return store_->Decide(DecideRequest{key, policy, cost, std::nullopt});
}

void Limiter::CheckAsync(std::string_view key, const Policy& policy, std::int64_t cost,
                         DecisionCallback done) {
  store_->DecideAsync(DecideRequest{key, policy, cost, std::nullopt}, std::move(done));
}

absl::StatusOr<Decision> Limiter::CheckAt(TimePoint now, std::string_view key, const Policy& policy,
                                          std::int64_t cost) {
  return store_->Decide(DecideRequest{key, policy, cost, now});
}

absl::StatusOr<MultiDecision> Limiter::CheckAll(std::span<const CheckItem> items) {
  return store_->DecideAll(MultiRequest{items, std::nullopt});
}

absl::StatusOr<MultiDecision> Limiter::CheckAllAt(TimePoint now, std::span<const CheckItem> items) {
  return store_->DecideAll(MultiRequest{items, now});
}

void Limiter::CheckAllAsync(std::span<const CheckItem> items, MultiCallback done) {
  store_->DecideAllAsync(MultiRequest{items, std::nullopt}, std::move(done));
}

}  // namespace floodgate
