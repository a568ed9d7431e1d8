// POST /v1/check: one key under a rule or an inline policy, or several "items".

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "common/strings.h"
#include "server/endpoints/endpoints.h"
#include "server/render.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

namespace {

// One entry of /v1/check's "items": {"key", "rule" | "policy", "cost", "name"}. A rule
// brings all its limits, keyed as a {"key", "rule"} check keys them.
absl::Status AddCheckItem(simdjson::dom::object item, std::size_t index, const Request& request,
                          const ServerConfig& config, RequestLimits& limits) {
  const auto bad = [index](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("items[{}]: {}", index, what));
  };
  std::string_view key, rule_name, policy_text, name;
  std::int64_t cost = -1, hold_ms = 0;
  for (const auto [field, value] : item) {
    if (field == "key") {
      if (value.get_string().get(key) != simdjson::SUCCESS) return bad("\"key\" must be a string");
    } else if (field == "rule") {
      if (value.get_string().get(rule_name) != simdjson::SUCCESS) {
        return bad("\"rule\" must be a string");
      }
    } else if (field == "policy") {
      if (value.get_string().get(policy_text) != simdjson::SUCCESS) {
        return bad("\"policy\" must be a string");
      }
    } else if (field == "name") {
      if (value.get_string().get(name) != simdjson::SUCCESS)
        return bad("\"name\" must be a string");
    } else if (field == "cost") {
      if (value.get_int64().get(cost) != simdjson::SUCCESS || cost < 0 || cost > kMaxCost) {
        return bad("\"cost\" must be a whole number from 0 to 1000000000");
      }
    } else if (field == "hold_ms") {
      if (value.get_int64().get(hold_ms) != simdjson::SUCCESS || hold_ms < 1 ||
          hold_ms > kMaxHold.count() / 1000) {
        return bad(fmt::format("\"hold_ms\" must be a whole number from 1 to {}",
                               kMaxHold.count() / 1000));
      }
    } else {
      return bad(fmt::format("unknown field \"{}\" (key, rule, policy, cost, name, hold_ms)",
                             std::string_view(field)));
    }
  }
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return bad(fmt::format("\"key\" must be 1 to {} bytes", kMaxKeyBytes));
  }
  if (rule_name.empty() == policy_text.empty())
    return bad("give exactly one of \"rule\" and \"policy\"");
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return absl::NotFoundError(fmt::format("items[{}]: unknown rule \"{}\"", index, rule_name));
    }
    AddRuleLimits(*rule, key, ':', "", cost < 0 ? rule->cost : cost, request, config, limits,
                  std::chrono::milliseconds(hold_ms));
    if (std::find(limits.rules.begin(), limits.rules.end(), rule->name) == limits.rules.end()) {
      limits.rules.push_back(rule->name);
    }
    return absl::OkStatus();
  }
  auto policy = Policy::Parse(policy_text);
  if (!policy.ok()) return bad(MessageOf(policy.status()));
  limits.Add(std::string(key), name.empty() ? fmt::format("items[{}]", index) : std::string(name),
             RequestLimits::kNoRule, *policy, cost < 0 ? 1 : cost, config.shadow,
             std::chrono::milliseconds(hold_ms));
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
                             const RequestLimits& limits,
                             absl::StatusOr<LimitsDecision> decision) {
        if (!decision.ok()) return respond(StoreError(reply, decision.status()));
        Response response = MakeResponse(reply, http::status::ok, CheckJson(limits, *decision),
                                         "application/json");
        AddLimitHeaders(response, limits, *decision);
        respond(std::move(response));
      });
}

}  // namespace

void Check(const Request& request, const ServerConfig& config, Decider& decider,
           Respond respond) {
  const auto bad = [&](std::string_view message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string& body = request.body();
  if (const auto error = parser.parse(body.data(), body.size()).get(doc); error) {
    return bad(fmt::format("the body must be a JSON object ({})", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) {
    return bad("the body must be a JSON object");
  }
  simdjson::dom::array items;
  if (object["items"].get_array().get(items) == simdjson::SUCCESS) {
    if (object.size() != 1) return bad("give \"items\" alone, or a single key");
    auto limits = std::make_shared<RequestLimits>();
    limits->shape = RequestLimits::Shape::kItemized;
    std::size_t n = 0;
    for (simdjson::dom::element element : items) {
      simdjson::dom::object item;
      if (element.get_object().get(item) != simdjson::SUCCESS) {
        return bad(fmt::format("items[{}] must be a JSON object", n));
      }
      auto status = AddCheckItem(item, n, request, config, *limits);
      if (!status.ok()) {
        return respond(ErrorResponse(
            request, absl::IsNotFound(status) ? http::status::not_found : http::status::bad_request,
            absl::IsNotFound(status) ? "not_found" : "invalid_argument", MessageOf(status)));
      }
      ++n;
    }
    if (limits->items.empty() || limits->items.size() > kMaxItems) {
      return bad(fmt::format("\"items\" must hold 1 to {} limits, got {}", kMaxItems,
                             limits->items.size()));
    }
    return Answer(request, decider, std::move(limits), std::move(respond));
  }
  std::string_view key, rule_name, policy_text;
  bool has_key = false, has_rule = false, has_policy = false, has_cost = false;
  std::int64_t cost = 1;
  for (const auto [name, value] : object) {
    if (name == "key") {
      if (value.get_string().get(key) != simdjson::SUCCESS) return bad("\"key\" must be a string");
      has_key = true;
    } else if (name == "rule") {
      if (value.get_string().get(rule_name) != simdjson::SUCCESS)
        return bad("\"rule\" must be a string");
      has_rule = true;
    } else if (name == "policy") {
      if (value.get_string().get(policy_text) != simdjson::SUCCESS) {
        return bad("\"policy\" must be a string");
      }
      has_policy = true;
    } else if (name == "cost") {
      if (value.get_int64().get(cost) != simdjson::SUCCESS || cost < 0 || cost > kMaxCost) {
        return bad("\"cost\" must be a whole number from 0 to 1000000000");
      }
      has_cost = true;
    }
  }
  if (!has_key) return bad("missing \"key\"");
  if (has_rule == has_policy) return bad("give exactly one of \"rule\" and \"policy\"");
  if (key.empty()) return bad("\"key\" must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return bad(fmt::format("\"key\" is {} bytes; the limit is {}", key.size(), kMaxKeyBytes));
  }
  auto limits = std::make_shared<RequestLimits>();
  if (has_rule) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(ErrorResponse(request, http::status::not_found, "not_found",
                                   fmt::format("unknown rule \"{}\"", rule_name)));
    }
    AddRuleLimits(*rule, key, ':', "", has_cost ? cost : rule->cost, request, config, *limits);
    limits->rules.push_back(rule->name);
  } else {
    auto policy = Policy::Parse(policy_text);
    if (!policy.ok()) return bad(MessageOf(policy.status()));
    limits->shape = RequestLimits::Shape::kOne;
    limits->Add(std::string(key), std::string(kInlinePolicy), RequestLimits::kNoRule, *policy,
                cost, false);
    limits->rules.emplace_back(kInlinePolicy);
  }
  Answer(request, decider, std::move(limits), std::move(respond));
}

}  // namespace floodgate::server::endpoints
