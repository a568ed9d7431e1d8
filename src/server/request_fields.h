#pragma once

// The fields of a decision request's JSON body, parsed in one place with one strictness.
//
// For every endpoint: each field of its type and range, a field the endpoint does not take or one
// given twice refused by name.

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace floodgate::server {

enum class Field : std::uint8_t {
  kKey,
  kRule,
  kPolicy,
  kName,
  kCost,         // 0..kMaxCost
  kHoldMs,       // 1..kMaxHold in ms
  kEstimate,     // a whole number; the store checks its range
  kReservation,  // an id /v1/reserve answered
  kLease,        // an id /v1/acquire answered
  kActual,       // a whole number; the store checks its range
  kUnits,        // 1..kMaxCost: a refund's or a penalty's (/v1/keys/...)
};

// The fields given; strings point into the parsed document.
struct RequestFields {
  std::optional<std::string_view> key, rule, policy, name, reservation, lease;
  std::optional<std::int64_t> cost, hold_ms, estimate, actual, units;
};

// The body as a JSON object, parsed by this thread's parser: valid until the thread's
// next ParseObject.
absl::StatusOr<simdjson::dom::object> ParseObject(const std::string& body);

// The fields of `object`, each one of `allowed` (listed in this order when another is
// refused) and given once (a duplicate is refused by its name).
absl::StatusOr<RequestFields> ParseFields(simdjson::dom::object object,
                                          std::span<const Field> allowed);

// What every decision names: a "key" of 1 to kMaxKeyBytes bytes and exactly one of "rule"
// and "policy".
absl::Status CheckKeyAndLimit(const RequestFields& fields);

}  // namespace floodgate::server
