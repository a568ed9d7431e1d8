// The holding endpoints: /v1/reserve, /v1/settle, /v1/acquire, /v1/release, the settle hook.

#include <absl/strings/ascii.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "common/strings.h"
#include "server/endpoints/endpoints.h"
#include "server/headers.h"
#include "server/render.h"
#include "server/request_fields.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

namespace {

// The settle hook (docs/leases.md, "Behind nginx or Envoy"): /v1/settle or /v1/release
// without a body. Every lease of X-RateLimit-Lease is released and every reservation of
// X-RateLimit-Reservation settled at X-RateLimit-Actual; 204 when each was, else the
// first refusal's error (a lease or reservation not found was settled already, or its
// hold had ended).
void SettleHook(const Request& request, Store& store, Respond respond) {
  struct Hook {
    std::vector<std::pair<std::string, std::int64_t>> settles;  // id, actual
    std::size_t answered = 0;
    std::mutex mu;
    absl::Status first_error;
    Reply reply;
    Respond respond;
  };
  auto hook = std::make_shared<Hook>();
  const auto add = [&](std::string_view header, std::int64_t actual) {
    for (const absl::string_view id : absl::StrSplit(ToAbsl(header), ',', absl::SkipWhitespace())) {
      hook->settles.emplace_back(ToStd(absl::StripAsciiWhitespace(id)), actual);
    }
  };
  const auto bad = [&](std::string message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  add(HeaderValue(request, kLeaseHeader), 0);
  const std::string_view reservations = HeaderValue(request, kReservationHeader);
  if (!reservations.empty()) {
    const std::string_view text = HeaderValue(request, kActualHeader);
    std::uint64_t actual = 0;
    if (!ParseDecimal(text, actual) || actual > static_cast<std::uint64_t>(kMaxCost)) {
      return bad(
          fmt::format("{} must be the actual cost, a whole number from 0 to {}, got \"{}\" (the "
                      "reservations stay charged at their estimates until their holds end)",
                      kActualHeader, kMaxCost, text));
    }
    add(reservations, static_cast<std::int64_t>(actual));
  }
  if (hook->settles.empty() || hook->settles.size() > kMaxItems) {
    return bad(fmt::format("give a JSON body, or 1 to {} ids in {} and {}", kMaxItems, kLeaseHeader,
                           kReservationHeader));
  }
  hook->reply = Reply::To(request);
  hook->respond = std::move(respond);
  for (const auto& [id, actual] : hook->settles) {
    store.SettleAsync(
        SettleRequest{id, actual, std::nullopt}, [hook](absl::StatusOr<Decision> done) {
          std::unique_lock lock(hook->mu);
          if (!done.ok() && hook->first_error.ok()) hook->first_error = done.status();
          if (++hook->answered < hook->settles.size()) return;
          lock.unlock();
          if (!hook->first_error.ok()) {
            return hook->respond(StoreError(hook->reply, hook->first_error));
          }
          hook->respond(MakeResponse(hook->reply, http::status::no_content, "", "text/plain"));
        });
  }
}

}  // namespace

void Reserve(const Request& request, const ServerConfig& config, Holding holding, Decider& decider,
             Respond respond) {
  const bool lease = holding == Holding::kLease;
  const auto bad = [&](std::string_view message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  static constexpr Field kReserveFields[] = {Field::kKey, Field::kRule, Field::kPolicy,
                                             Field::kEstimate, Field::kHoldMs};
  static constexpr Field kAcquireFields[] = {Field::kKey, Field::kRule, Field::kPolicy};
  const absl::StatusOr<simdjson::dom::object> object = ParseObject(request.body());
  if (!object.ok()) return bad(MessageOf(object.status()));
  const absl::StatusOr<RequestFields> fields =
      lease ? ParseFields(*object, kAcquireFields) : ParseFields(*object, kReserveFields);
  if (!fields.ok()) return bad(MessageOf(fields.status()));
  if (const absl::Status valid = CheckKeyAndLimit(*fields); !valid.ok()) {
    return bad(MessageOf(valid));
  }
  const std::string_view key = *fields->key, rule_name = fields->rule.value_or("");
  const std::optional<std::int64_t> estimate = lease ? 1 : fields->estimate;
  if (!estimate) return bad("missing \"estimate\" (the cost to reserve)");
  const std::optional<std::int64_t> hold_ms = fields->hold_ms;
  // Owned by the answer, which may come later on the store's thread.
  auto owned = std::make_shared<RequestLimits>();
  RequestLimits& limits = *owned;
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(ErrorResponse(request, http::status::not_found, "not_found",
                                   fmt::format("unknown rule \"{}\"", rule_name)));
    }
    // Keyed as /v1/check keys the rule's limit, so both spend the same state.
    AddRuleLimits(*rule, key, ':', "", *estimate, request, config, limits);
    if (limits.items.size() != 1 || limits.items.front().shadow) {
      const bool shadow = limits.items.size() == 1;
      return bad(fmt::format("rule \"{}\" has {} limit(s){}: a {} holds one enforced limit",
                             rule_name, limits.items.size(), shadow ? ", in shadow mode" : "",
                             lease ? "lease" : "reservation"));
    }
    limits.rules.push_back(rule->name);
  } else {
    auto policy = InlinePolicy(*fields->policy, config);
    if (!policy.ok()) return respond(StoreError(Reply::To(request), policy.status()));
    limits.Add(std::string(key), std::string(kInlinePolicy), RequestLimits::kNoRule, *policy,
               *estimate, false);
    limits.rules.emplace_back(kInlinePolicy);
  }
  limits.Seal();
  const CheckItem& item = limits.items.front();
  const std::chrono::microseconds hold = lease     ? item.policy.period
                                         : hold_ms ? std::chrono::milliseconds(*hold_ms)
                                                   : kDefaultHold;
  auto answer = [&decider, reply = Reply::To(request), hold, lease, limits = std::move(owned),
                 respond = std::move(respond)](absl::StatusOr<Reservation> reservation) {
    if (!reservation.ok()) return respond(StoreError(reply, reservation.status()));
    const Decision& decision = reservation->decision;
    const CheckItem& item = limits->items.front();
    // An inline policy counts under its rule "policy" (kInlinePolicy), not per limit.
    decider.CountSingle(*limits, decision);
    std::string body = ToJson(decision);
    if (!reservation->id.empty()) {
      body.pop_back();  // the closing brace
      body +=
          fmt::format(R"(,"{}":{},"{}":{}}})", lease ? "lease" : "reservation",
                      JsonString(reservation->id), lease ? "lease_us" : "hold_us", hold.count());
    }
    Response response = MakeResponse(reply, http::status::ok, std::move(body), "application/json");
    AddHeaders(response, RateLimitHeaders(item.name, item.policy, decision));
    respond(std::move(response));
  };
  if (lease) {
    return decider.store().AcquireAsync(AcquireRequest{item.key, item.policy, std::nullopt},
                                        std::move(answer));
  }
  decider.store().ReserveAsync(ReserveRequest{item.key, item.policy, item.cost, hold, std::nullopt},
                               std::move(answer));
}

void Settle(const Request& request, Holding holding, Decider& decider, Respond respond) {
  const bool lease = holding == Holding::kLease;
  const auto bad = [&](std::string_view message) {
    respond(ErrorResponse(request, http::status::bad_request, "invalid_argument", message));
  };
  if (request.body().empty()) return SettleHook(request, decider.store(), std::move(respond));
  static constexpr Field kSettleFields[] = {Field::kReservation, Field::kActual};
  static constexpr Field kReleaseFields[] = {Field::kLease};
  const absl::StatusOr<simdjson::dom::object> object = ParseObject(request.body());
  if (!object.ok()) return bad(MessageOf(object.status()));
  const absl::StatusOr<RequestFields> fields =
      lease ? ParseFields(*object, kReleaseFields) : ParseFields(*object, kSettleFields);
  if (!fields.ok()) return bad(MessageOf(fields.status()));
  const std::string_view id = (lease ? fields->lease : fields->reservation).value_or("");
  const std::optional<std::int64_t> actual = lease ? 0 : fields->actual;
  if (id.empty()) {
    return bad(lease ? "missing \"lease\" (the id /v1/acquire answered)"
                     : "missing \"reservation\" (the id /v1/reserve answered)");
  }
  if (!actual) return bad("missing \"actual\" (the cost the request really had)");
  // A release is the settle of the lease's reservation at 0 (Store::Release).
  decider.store().SettleAsync(
      SettleRequest{id, *actual, std::nullopt},
      [reply = Reply::To(request),
       respond = std::move(respond)](absl::StatusOr<Decision> decision) {
        if (!decision.ok()) return respond(StoreError(reply, decision.status()));
        respond(MakeResponse(reply, http::status::ok, ToJson(*decision), "application/json"));
      });
}

}  // namespace floodgate::server::endpoints
