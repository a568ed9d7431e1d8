// The key operations: POST /v1/keys/reset, /v1/keys/refund, /v1/keys/penalize, behind a token.

#include <absl/strings/match.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <simdjson.h>

#include <algorithm>
#include <mutex>

#include "common/strings.h"
#include "server/endpoints/endpoints.h"
#include "server/render.h"
#include "server/request_fields.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

namespace {

// Whether `given` is the token, in time that tells nothing of either: both are hashed to a
// fixed size first, so neither the length nor the first differing byte shows.
bool SameToken(std::string_view given, std::string_view token) {
  unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(given.data()), given.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

// `Authorization: Bearer <token>` with the configured token. One answer for a missing and
// a wrong token: which one it was would tell a guesser something.
bool Authorized(const Request& request, const AdminSection& admin) {
  constexpr std::string_view kBearer = "Bearer ";
  const std::string_view header = HeaderValue(request, "Authorization");
  if (header.size() <= kBearer.size() ||
      !absl::StartsWithIgnoreCase(ToAbsl(header), ToAbsl(kBearer))) {
    return false;
  }
  return SameToken(header.substr(kBearer.size()), admin.token);
}

// The limits operated on (a rule's but its concurrency limits, whose leases are given
// back by their release) and every answer, gathered: they are operated on at once.
struct Gathered {
  std::shared_ptr<RequestLimits> limits;
  std::vector<std::size_t> operated;  // indexes into limits->items
  std::mutex mu;
  std::vector<absl::StatusOr<Decision>> answers;
  std::size_t left = 0;
};

// The answer: an inline policy's Decision JSON; for a rule, each state operated on, by its
// limit's name and the door that keys it ({"items": [{"name", "via", Decision fields}]}).
std::string AnswerJson(const Gathered& gathered, const std::vector<Decision>& decisions) {
  if (gathered.limits->rules.front() == kInlinePolicy) return ToJson(decisions.front());
  std::string json = R"({"items":[)";
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    const CheckItem& limit = gathered.limits->items[gathered.operated[i]];
    std::string item = ToJson(decisions[i]);
    item.erase(0, 1);  // the opening brace: the name goes first
    const bool authz = limit.key.find('|') < limit.key.find('{');
    json += fmt::format("{}{{\"name\":{},\"via\":\"{}\",{}", i == 0 ? "" : ",",
                        JsonString(limit.name), authz ? "authz" : "check", item);
  }
  return json + "]}";
}

}  // namespace

void OperateKey(const Request& request, const ServerConfig& config, KeyOperation operation,
                Decider& decider, Respond respond) {
  if (!config.admin) {  // as any path that is not an endpoint
    return respond(ErrorResponse(request, http::status::not_found, "not_found",
                                 fmt::format("no endpoint POST {}", PathOf(TargetOf(request)))));
  }
  if (!Authorized(request, *config.admin)) {
    decider.metrics().CountUnauthorized();
    Response r = ErrorResponse(request, http::status::unauthorized, "unauthenticated",
                               "a key operation needs the admin token: Authorization: Bearer "
                               "<token> (admin.token_file)");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return respond(std::move(r));
  }
  const auto bad = [&](std::string_view message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  static constexpr Field kResetFields[] = {Field::kKey, Field::kRule, Field::kPolicy};
  static constexpr Field kUnitFields[] = {Field::kKey, Field::kRule, Field::kPolicy, Field::kUnits};
  const bool counted = operation != KeyOperation::kReset;
  const absl::StatusOr<simdjson::dom::object> object = ParseObject(request.body());
  if (!object.ok()) return bad(MessageOf(object.status()));
  const absl::StatusOr<RequestFields> fields =
      counted ? ParseFields(*object, kUnitFields) : ParseFields(*object, kResetFields);
  if (!fields.ok()) return bad(MessageOf(fields.status()));
  if (const absl::Status valid = CheckKeyAndLimit(*fields); !valid.ok()) {
    return bad(MessageOf(valid));
  }
  if (counted && !fields->units) {
    return bad(fmt::format("missing \"units\" (how many to {})", KeyOperationName(operation)));
  }
  const std::int64_t units = counted ? *fields->units : 0;
  const std::string_view key = *fields->key, rule_name = fields->rule.value_or("");
  auto limits = std::make_shared<RequestLimits>();
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(ErrorResponse(request, http::status::not_found, "not_found",
                                   fmt::format("unknown rule \"{}\"", rule_name)));
    }
    // Each limit as /v1/check keys it (`<rule>:{key}`) and as /v1/authz does (`<rule>|{key}`,
    // the key being the client's identity, "ip=..."): the operation meets the state either
    // door spent. (An override chosen by the identity's value is /v1/check's choice here.)
    AddRuleLimits(*rule, key, ':', "", 1, request, config, *limits);
    AddRuleLimits(*rule, key, '|', "", 1, request, config, *limits);
    limits->rules.push_back(rule->name);
  } else {
    auto policy = InlinePolicy(*fields->policy, config);
    if (!policy.ok()) return respond(StoreError(Reply::To(request), policy.status()));
    limits->Add(std::string(key), std::string(kInlinePolicy), RequestLimits::kNoRule, *policy, 1,
                false);
    limits->rules.emplace_back(kInlinePolicy);
  }
  limits->Seal();
  auto gathered = std::make_shared<Gathered>();
  for (std::size_t i = 0; i < limits->items.size(); ++i) {
    if (limits->items[i].policy.algorithm != Algorithm::kConcurrency) {
      gathered->operated.push_back(i);
    }
  }
  if (gathered->operated.empty()) {
    return bad(
        fmt::format("rule \"{}\" has only concurrency limits: a lease is given back by "
                    "POST /v1/release",
                    rule_name));
  }
  gathered->limits = std::move(limits);
  gathered->answers.resize(gathered->operated.size(), absl::UnknownError("not answered"));
  gathered->left = gathered->operated.size();
  // Copied before the first call: an answer given inline may complete the request.
  const std::vector<std::size_t> operated = gathered->operated;
  for (std::size_t i = 0; i < operated.size(); ++i) {
    const CheckItem& item = gathered->limits->items[operated[i]];
    decider.store().OperateAsync(
        OperateRequest{item.key, item.policy, operation, units, std::nullopt},
        [i, gathered, operation, &decider, reply = Reply::To(request),
         respond](absl::StatusOr<Decision> answer) mutable {
          std::unique_lock lock(gathered->mu);
          gathered->answers[i] = std::move(answer);
          if (--gathered->left > 0) return;
          lock.unlock();
          std::vector<Decision> decisions;
          for (const auto& a : gathered->answers) {
            if (!a.ok()) return respond(StoreError(reply, a.status()));
            decisions.push_back(*a);
          }
          decider.metrics().CountOperation(gathered->limits->rules.front(), operation);
          respond(MakeResponse(reply, http::status::ok, AnswerJson(*gathered, decisions),
                               "application/json"));
        });
  }
}

}  // namespace floodgate::server::endpoints
