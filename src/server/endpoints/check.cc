// POST /v1/check: one key under a rule or an inline policy, or several "items".

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "common/strings.h"
#include "server/endpoints/endpoints.h"
#include "server/render.h"
#include "server/request_fields.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

namespace {

constexpr std::size_t kMaxItemNameBytes = 64;  // as a rule's name

// One entry of /v1/check's "items": {"key", "rule" | "policy", "cost", "name", "hold_ms"}.
// A rule brings all its limits, keyed as a {"key", "rule"} check keys them.
absl::Status AddCheckItem(simdjson::dom::object item, std::size_t index, const Request& request,
                          const ServerConfig& config, RequestLimits& limits) {
  const auto bad = [index](const absl::Status& status) {
    return absl::InvalidArgumentError(fmt::format("items[{}]: {}", index, MessageOf(status)));
  };
  static constexpr Field kItemFields[] = {Field::kKey,  Field::kRule, Field::kPolicy,
                                          Field::kCost, Field::kName, Field::kHoldMs};
  const absl::StatusOr<RequestFields> fields = ParseFields(item, kItemFields);
  if (!fields.ok()) return bad(fields.status());
  if (const absl::Status valid = CheckKeyAndLimit(*fields); !valid.ok()) return bad(valid);
  const std::string_view key = *fields->key, rule_name = fields->rule.value_or("");
  const std::string_view name = fields->name.value_or("");
  // The name goes into the RateLimit-Policy and RateLimit headers, a structured-field
  // string (RFC 8941): printable ASCII only. A CR LF in it wrote headers of the client's
  // choosing into the response (Set-Cookie...).
  if (name.size() > kMaxItemNameBytes ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
    return absl::InvalidArgumentError(
        fmt::format("items[{}]: \"name\" must be 0 to {} printable ASCII characters", index,
                    kMaxItemNameBytes));
  }
  const std::chrono::milliseconds hold(fields->hold_ms.value_or(0));
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return absl::NotFoundError(fmt::format("items[{}]: unknown rule \"{}\"", index, rule_name));
    }
    AddRuleLimits(*rule, key, ':', "", fields->cost.value_or(rule->cost), request, config, limits,
                  hold);
    if (std::find(limits.rules.begin(), limits.rules.end(), rule->name) == limits.rules.end()) {
      limits.rules.push_back(rule->name);
    }
    return absl::OkStatus();
  }
  auto policy = InlinePolicy(*fields->policy, config);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        fmt::format("items[{}]: {}", index, MessageOf(policy.status())));
  }
  limits.Add(std::string(key), name.empty() ? fmt::format("items[{}]", index) : std::string(name),
             RequestLimits::kNoRule, *policy, fields->cost.value_or(1), config.shadow, hold);
  if (std::find(limits.rules.begin(), limits.rules.end(), kInlinePolicy) == limits.rules.end()) {
    limits.rules.emplace_back(kInlinePolicy);
  }
  return absl::OkStatus();
}

// Decides the limits and answers the Decision JSON (several limits: the MultiDecision's)
// with the rate-limit headers.
void Answer(const Request& request, Decider& decider, std::shared_ptr<RequestLimits> limits,
            Respond respond) {
  decider.DecideLimits(
      std::move(limits), [reply = Reply::To(request), respond = std::move(respond)](
                             const RequestLimits& limits, absl::StatusOr<LimitsDecision> decision) {
        if (!decision.ok()) return respond(StoreError(reply, decision.status()));
        Response response =
            MakeResponse(reply, http::status::ok, CheckJson(limits, *decision), "application/json");
        AddLimitHeaders(response, limits, *decision);
        respond(std::move(response));
      });
}

}  // namespace

void Check(const Request& request, const ServerConfig& config, Decider& decider, Respond respond) {
  const auto bad = [&](std::string_view message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  const absl::StatusOr<simdjson::dom::object> object = ParseObject(request.body());
  if (!object.ok()) return bad(MessageOf(object.status()));
  simdjson::dom::array items;
  if ((*object)["items"].get_array().get(items) == simdjson::SUCCESS) {
    if (object->size() != 1) {
      std::size_t named = 0;
      for (const auto field : *object) named += field.key == "items";
      return bad(named > 1 ? "field \"items\" given twice"
                           : "give \"items\" alone, or a single key");
    }
    // Counted before any item is read (a 64 KiB body holds thousands), and again as
    // rules add their limits: no request does more than kMaxItems items' work.
    const auto too_many = [&](std::size_t count) {
      return bad(fmt::format("\"items\" must hold 1 to {} limits, got {}", kMaxItems, count));
    };
    if (items.size() > kMaxItems) return too_many(items.size());
    auto limits = std::make_shared<RequestLimits>();
    limits->shape = RequestLimits::Shape::kItemized;
    std::size_t n = 0;
    for (simdjson::dom::element element : items) {
      simdjson::dom::object item;
      if (element.get_object().get(item) != simdjson::SUCCESS) {
        return bad(fmt::format("items[{}] must be a JSON object", n));
      }
      auto status = AddCheckItem(item, n, request, config, *limits);
      if (!status.ok()) return respond(StoreError(Reply::To(request), status));
      if (limits->items.size() > kMaxItems) return too_many(limits->items.size());
      ++n;
    }
    if (limits->items.empty()) return too_many(0);
    return Answer(request, decider, std::move(limits), std::move(respond));
  }
  static constexpr Field kCheckFields[] = {Field::kKey, Field::kRule, Field::kPolicy, Field::kCost};
  const absl::StatusOr<RequestFields> fields = ParseFields(*object, kCheckFields);
  if (!fields.ok()) return bad(MessageOf(fields.status()));
  if (const absl::Status valid = CheckKeyAndLimit(*fields); !valid.ok()) {
    return bad(MessageOf(valid));
  }
  const std::string_view key = *fields->key, rule_name = fields->rule.value_or("");
  auto limits = std::make_shared<RequestLimits>();
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(ErrorResponse(request, http::status::not_found, "not_found",
                                   fmt::format("unknown rule \"{}\"", rule_name)));
    }
    AddRuleLimits(*rule, key, ':', "", fields->cost.value_or(rule->cost), request, config, *limits);
    limits->rules.push_back(rule->name);
  } else {
    auto policy = InlinePolicy(*fields->policy, config);
    if (!policy.ok()) return respond(StoreError(Reply::To(request), policy.status()));
    limits->shape = RequestLimits::Shape::kOne;
    limits->Add(std::string(key), std::string(kInlinePolicy), RequestLimits::kNoRule, *policy,
                fields->cost.value_or(1), false);
    limits->rules.emplace_back(kInlinePolicy);
  }
  Answer(request, decider, std::move(limits), std::move(respond));
}

}  // namespace floodgate::server::endpoints
