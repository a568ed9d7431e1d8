// Limiter: the application's calls, each handed to its store.

#include <floodgate/limiter.h>

#include "delay_queue.h"

namespace floodgate {

absl::StatusOr<Limiter> Limiter::Open(std::string_view store_url) {
  auto store = OpenStore(store_url);
  if (!store.ok()) return store.status();
  return Limiter(*std::move(store));
}

Limiter::Limiter(std::unique_ptr<Store> store)
    : timers_(std::make_unique<DelayQueue>()), store_(std::move(store)) {}
Limiter::~Limiter() = default;
Limiter::Limiter(Limiter&&) noexcept = default;
Limiter& Limiter::operator=(Limiter&&) noexcept = default;

absl::StatusOr<Decision> Limiter::Check(std::string_view key, const Policy& policy,
                                        std::int64_t cost) {
  return store_->Decide(DecideRequest{key, policy, cost, std::nullopt});
}

absl::StatusOr<Decision> Limiter::Check(std::string_view key, const PreparedPolicy& policy,
                                        std::int64_t cost) {
  return store_->Decide(key, policy, cost, std::nullopt);
}

absl::StatusOr<Decision> Limiter::CheckAt(TimePoint now, std::string_view key,
                                          const PreparedPolicy& policy, std::int64_t cost) {
  return store_->Decide(key, policy, cost, now);
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

absl::StatusOr<Reservation> Limiter::Reserve(std::string_view key, const Policy& policy,
                                             std::int64_t estimate,
                                             std::chrono::microseconds hold) {
  return store_->Reserve(ReserveRequest{key, policy, estimate, hold, std::nullopt});
}

absl::StatusOr<Reservation> Limiter::ReserveAt(TimePoint now, std::string_view key,
                                               const Policy& policy, std::int64_t estimate,
                                               std::chrono::microseconds hold) {
  return store_->Reserve(ReserveRequest{key, policy, estimate, hold, now});
}

absl::StatusOr<Decision> Limiter::Settle(std::string_view id, std::int64_t actual) {
  return store_->Settle(SettleRequest{id, actual, std::nullopt});
}

absl::StatusOr<Decision> Limiter::SettleAt(TimePoint now, std::string_view id,
                                           std::int64_t actual) {
  return store_->Settle(SettleRequest{id, actual, now});
}

absl::StatusOr<Lease> Limiter::Acquire(std::string_view key, const Policy& policy) {
  return store_->Acquire(AcquireRequest{key, policy, std::nullopt});
}

absl::StatusOr<Lease> Limiter::AcquireAt(TimePoint now, std::string_view key,
                                         const Policy& policy) {
  return store_->Acquire(AcquireRequest{key, policy, now});
}

absl::StatusOr<Decision> Limiter::Reset(std::string_view key, const Policy& policy) {
  return store_->Operate(OperateRequest{key, policy, KeyOperation::kReset, 0, std::nullopt});
}

absl::StatusOr<Decision> Limiter::Refund(std::string_view key, const Policy& policy,
                                         std::int64_t units) {
  return store_->Operate(OperateRequest{key, policy, KeyOperation::kRefund, units, std::nullopt});
}

absl::StatusOr<Decision> Limiter::Penalize(std::string_view key, const Policy& policy,
                                           std::int64_t units) {
  return store_->Operate(OperateRequest{key, policy, KeyOperation::kPenalize, units, std::nullopt});
}

absl::StatusOr<Decision> Limiter::OperateAt(TimePoint now, std::string_view key,
                                            const Policy& policy, KeyOperation op,
                                            std::int64_t units) {
  return store_->Operate(OperateRequest{key, policy, op, units, now});
}

absl::StatusOr<Decision> Limiter::Release(std::string_view id) {
  return store_->Release(ReleaseRequest{id, std::nullopt});
}

absl::StatusOr<Decision> Limiter::ReleaseAt(TimePoint now, std::string_view id) {
  return store_->Release(ReleaseRequest{id, now});
}

}  // namespace floodgate
