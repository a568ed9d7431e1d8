#include <absl/status/status.h>
#include <floodgate/store.h>
#include <fmt/format.h>

namespace floodgate {

absl::Status ValidateRequest(const DecideRequest& request) {
  if (request.key.empty()) return absl::InvalidArgumentError("key must not be empty");
  if (request.key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("key is {} bytes; the limit is {}", request.key.size(), kMaxKeyBytes));
  }
  if (request.cost < 0 || request.cost > kMaxCost) {
    return absl::InvalidArgumentError(
        fmt::format("cost must be between 0 and 1000000000, got {}", request.cost));
  }
  if (request.now && request.now->time_since_epoch().count() < 0) {
    return absl::InvalidArgumentError("now must not be before the Unix epoch");
  }
  if (request.now && *request.now >= kLatestTime) {
    return absl::InvalidArgumentError("now must be before 2200-01-01");
  }
  return request.policy.Validate();
}

absl::StatusOr<Decision> Store::Decide(const DecideRequest& request) {
  if (absl::Status status = ValidateRequest(request); !status.ok()) return status;
  return DecideValidated(request);
}

void Store::DecideAsync(const DecideRequest& request, DecisionCallback done) {
  if (absl::Status status = ValidateRequest(request); !status.ok()) {
    done(std::move(status));
    return;
  }
  DecideAsyncValidated(request, std::move(done));
}

}  // namespace floodgate
