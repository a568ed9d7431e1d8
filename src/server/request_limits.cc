// Which limits and keys a request meets: a rule's limits keyed by the client's identity.

#include "server/request_limits.h"

#include <fmt/format.h>

namespace floodgate::server {

namespace ip = boost::asio::ip;

void RequestLimits::Add(std::string key, std::string name, std::size_t rule_length,
                        const Policy& policy, std::int64_t cost, bool shadow,
                        std::chrono::microseconds hold) {
  // Over-long keys are cut: clients that differ only past 512 bytes share a limit.
  if (key.size() > kMaxKeyBytes) key.resize(kMaxKeyBytes);
  keys.push_back(std::move(key));
  names.push_back(std::move(name));
  rule_lengths.push_back(rule_length);
  items.push_back(CheckItem{{}, policy, cost, {}, shadow, hold});
}

void RequestLimits::Reserve(std::size_t limits, std::size_t rule_count) {
  keys.reserve(limits);
  names.reserve(limits);
  items.reserve(limits);
  rule_lengths.reserve(limits);
  rules.reserve(rule_count);
}

void RequestLimits::Seal() {
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].key = keys[i];
    items[i].name = names[i];
  }
}

absl::StatusOr<Policy> InlinePolicy(std::string_view text, const ServerConfig& config) {
  // Refused before it is parsed: with inline policies off, nothing of the text is used.
  if (!config.inline_policies) {
    return absl::PermissionDeniedError(
        "inline policies are off (inline_policies: false): name a configured \"rule\"");
  }
  return Policy::Parse(text);
}

void AddRuleLimits(const Rule& rule, std::string_view identity, char sep,
                   std::string_view override_key, std::int64_t cost, const Request& request,
                   const ServerConfig& config, RequestLimits& limits,
                   std::chrono::microseconds hold) {
  const std::string_view chosen_by = override_key.empty() ? identity : override_key;
  for (const Limit& limit : rule.limits) {
    const std::string_view plan =
        limit.plan_header.empty() ? std::string_view() : HeaderValue(request, limit.plan_header);
    std::string key;  // <rule>.<limit><sep>{<identity>}, without a format string to parse
    key.reserve(limit.qualified.size() + identity.size() + 3);
    key.append(limit.qualified).append(1, sep).append(1, '{').append(identity).append(1, '}');
    const Policy& policy = limit.For(chosen_by, plan);
    // A concurrency limit holds its lease for the lease time, reserved or not.
    limits.Add(std::move(key), limit.qualified, rule.name.size(), policy, cost,
               limit.shadow || config.shadow,
               policy.algorithm == Algorithm::kConcurrency ? std::chrono::microseconds(0) : hold);
  }
}

std::pair<std::string, std::string> Identify(const Rule& rule, const Request& request,
                                             const ip::address& client,
                                             std::string& issued_cookie) {
  if (rule.identify.empty()) return {"*", "*"};
  std::string key, value;
  for (const IdentityPart& part : rule.identify) {
    if (!key.empty()) {
      key += '|';
      value += '+';
    }
    switch (part.kind) {
      case IdentityPart::Kind::kIp: {
        const std::string ip = client.to_string();
        key += "ip=" + ip;
        value += ip;
        break;
      }
      case IdentityPart::Kind::kHeader: {
        const std::string_view header = HeaderValue(request, part.name);
        if (header.empty()) {
          const std::string ip = client.to_string();
          key += "ip=" + ip;
          value += ip;
        } else {
          key += "h=";
          key += header;
          value += header;
        }
        break;
      }
      case IdentityPart::Kind::kCookie: {
        const auto cookie = CookieValue(request, part.name);
        if (cookie && LooksLikeUuid(*cookie)) {
          key += fmt::format("c={}", *cookie);
          value += *cookie;
        } else {
          const std::string ip = client.to_string();
          key += "ip=" + ip;
          value += ip;
          if (issued_cookie.empty()) {
            issued_cookie = fmt::format("{}={}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax",
                                        part.name, NewUuidV7());
          }
        }
        break;
      }
    }
  }
  return {std::move(key), std::move(value)};
}

void AddAuthzLimits(const std::vector<const Rule*>& rules, const Request& request,
                    const ip::address& client, const ServerConfig& config, RequestLimits& limits) {
  std::size_t count = 0;
  for (const Rule* rule : rules) count += rule->limits.size();
  limits.Reserve(count, rules.size());
  for (const Rule* rule : rules) {
    auto [key, value] = Identify(*rule, request, client, limits.issued_cookie);
    // cost_from_response: the rule's cost is reserved as the estimate (settled later).
    AddRuleLimits(*rule, key, '|', value, rule->cost, request, config, limits,
                  rule->cost_from_response ? rule->hold : std::chrono::microseconds(0));
    limits.rules.push_back(rule->name);
  }
}

}  // namespace floodgate::server
