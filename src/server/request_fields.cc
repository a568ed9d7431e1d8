// The fields of a decision request's JSON body, parsed with one strictness.

#include "server/request_fields.h"

#include <floodgate/decision.h>
#include <floodgate/reservation.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace floodgate::server {

namespace {

struct FieldSpec {
  Field field;
  std::string_view name;
  std::optional<std::string_view> RequestFields::*text = nullptr;
  std::optional<std::int64_t> RequestFields::*number = nullptr;
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
};

constexpr std::int64_t kMaxHoldMs = kMaxHold.count() / 1000;

constexpr FieldSpec kFields[] = {
    {Field::kKey, "key", &RequestFields::key},
    {Field::kRule, "rule", &RequestFields::rule},
    {Field::kPolicy, "policy", &RequestFields::policy},
    {Field::kName, "name", &RequestFields::name},
    {Field::kCost, "cost", nullptr, &RequestFields::cost, 0, kMaxCost},
    {Field::kHoldMs, "hold_ms", nullptr, &RequestFields::hold_ms, 1, kMaxHoldMs},
    {Field::kEstimate, "estimate", nullptr, &RequestFields::estimate},
    {Field::kReservation, "reservation", &RequestFields::reservation},
    {Field::kLease, "lease", &RequestFields::lease},
    {Field::kActual, "actual", nullptr, &RequestFields::actual},
    {Field::kUnits, "units", nullptr, &RequestFields::units, 1, kMaxCost},
};

const FieldSpec& SpecOf(Field field) { return kFields[static_cast<std::size_t>(field)]; }

bool Ranged(const FieldSpec& spec) {
  return spec.min != std::numeric_limits<std::int64_t>::min() ||
         spec.max != std::numeric_limits<std::int64_t>::max();
}

}  // namespace

absl::StatusOr<simdjson::dom::object> ParseObject(const std::string& body) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (const auto error = parser.parse(body.data(), body.size()).get(doc); error) {
    return absl::InvalidArgumentError(
        fmt::format("the body must be a JSON object ({})", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the body must be a JSON object");
  }
  return object;
}

absl::StatusOr<RequestFields> ParseFields(simdjson::dom::object object,
                                          std::span<const Field> allowed) {
  RequestFields fields;
  std::uint32_t seen = 0;  // a bit per Field
  for (const auto [key, value] : object) {
    const std::string_view name = key;  // a structured binding cannot be captured (clang)
    const auto known = std::find_if(allowed.begin(), allowed.end(),
                                    [&](Field f) { return SpecOf(f).name == name; });
    if (known == allowed.end()) {
      std::string names;
      for (const Field f : allowed) {
        names += fmt::format("{}{}", names.empty() ? "" : ", ", SpecOf(f).name);
      }
      return absl::InvalidArgumentError(fmt::format("unknown field \"{}\" ({})", name, names));
    }
    // JSON leaves duplicate names to the reader; taking the last (or the first) would let
    // a body mean two things to two readers ("cost":0,"cost":1), so neither is taken.
    const std::uint32_t bit = 1u << static_cast<unsigned>(*known);
    if ((seen & bit) != 0) {
      return absl::InvalidArgumentError(fmt::format("field \"{}\" given twice", name));
    }
    seen |= bit;
    const FieldSpec& spec = SpecOf(*known);
    if (spec.text != nullptr) {
      std::string_view text;
      if (value.get_string().get(text) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError(fmt::format("\"{}\" must be a string", name));
      }
      fields.*spec.text = text;
      continue;
    }
    std::int64_t number = 0;
    if (value.get_int64().get(number) != simdjson::SUCCESS || number < spec.min ||
        number > spec.max) {
      return absl::InvalidArgumentError(
          Ranged(spec) ? fmt::format("\"{}\" must be from {} to {} (a whole number)", name,
                                     spec.min, spec.max)
                       : fmt::format("\"{}\" must be a whole number", name));
    }
    fields.*spec.number = number;
  }
  return fields;
}

absl::Status CheckKeyAndLimit(const RequestFields& fields) {
  if (!fields.key) return absl::InvalidArgumentError("missing \"key\"");
  if (fields.key->empty()) return absl::InvalidArgumentError("\"key\" must not be empty");
  if (fields.key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("\"key\" is {} bytes; the limit is {}", fields.key->size(), kMaxKeyBytes));
  }
  // An empty "rule" or "policy" counts as none given.
  if (fields.rule.value_or("").empty() == fields.policy.value_or("").empty()) {
    return absl::InvalidArgumentError("give exactly one of \"rule\" and \"policy\"");
  }
  return absl::OkStatus();
}

}  // namespace floodgate::server
