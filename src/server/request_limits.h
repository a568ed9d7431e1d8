#pragma once

// Which limits and keys a request meets: a rule's limits keyed by the client's identity.
//
// Also the rules an authz request matches (docs/multi.md). Pure: no store, no I/O.

#include <absl/status/statusor.h>
#include <floodgate/multi.h>
#include <floodgate/policy.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/config.h"
#include "server/http_message.h"

namespace floodgate::server {

// Rate-limited requests name their policy "policy" in the IETF headers when they came
// with an inline policy string instead of a rule.
inline constexpr std::string_view kInlinePolicy = "policy";

// The limits one request meets (docs/multi.md), owning the strings their items point
// into, so that an answer arriving later on the store's thread still has them.
struct RequestLimits {
  std::vector<std::string> keys;
  std::vector<std::string> names;  // <rule>.<limit>, or the rule's name for a single policy
  std::vector<CheckItem> items;    // their keys and names set by Seal()
  std::vector<std::string> rules;  // the rules involved, for metrics
  // The length of the rule's name at the front of each name (kNoRule: a policy given in
  // the request, not counted per limit).
  std::vector<std::size_t> rule_lengths;
  std::string issued_cookie;  // /v1/authz: a new anonymous cookie to set
  // How the limits are decided: as fits them (a rule's), always all at once (/v1/check's
  // "items", answered item by item even for one), or always as one decision (/v1/check's
  // inline policy, which never holds a lease: a concurrency policy is only peeked at).
  enum class Shape { kAsFits, kItemized, kOne };
  Shape shape = Shape::kAsFits;

  static constexpr std::size_t kNoRule = std::string::npos;
  void Add(std::string key, std::string name, std::size_t rule_length, const Policy& policy,
           std::int64_t cost, bool shadow,
           std::chrono::microseconds hold = std::chrono::microseconds(0));
  // Room for `limits` limits from `rule_count` rules: one allocation per list.
  void Reserve(std::size_t limits, std::size_t rule_count);
  // Points every item at its key and name: once all are added.
  void Seal();
  // Whether the single decision serves the request: kOne, or as fits one enforced limit
  // that holds nothing (no lease, no reservation).
  bool single() const {
    if (shape != Shape::kAsFits) return shape == Shape::kOne;
    return items.size() == 1 && !items.front().shadow && HoldOf(items.front()).count() == 0;
  }
};

// The policy a request brings ("policy": an inline policy): PermissionDenied when the
// config has `inline_policies: false`, else the parsed policy or InvalidArgument saying
// what is wrong with it.
absl::StatusOr<Policy> InlinePolicy(std::string_view text, const ServerConfig& config);

// A rule's limits for one client: each keyed `<rule>.<limit><sep>{<identity>}` (the
// client in a hash tag, so that all limits of one client share a Redis Cluster slot),
// its policy chosen by the client's override (`override_key`, else `identity`) or plan
// header. `hold` > 0: each rate limit reserves `cost` for that long (cost_from_response).
void AddRuleLimits(const Rule& rule, std::string_view identity, char sep,
                   std::string_view override_key, std::int64_t cost, const Request& request,
                   const ServerConfig& config, RequestLimits& limits,
                   std::chrono::microseconds hold = std::chrono::microseconds(0));

// The client as a rule identifies it: the key part (`ip=...`, `h=...`, `c=...` joined by
// '|'; "*" for `identify: none`) and the value overrides are named by (the values joined
// by '+'). A missing cookie falls back to the IP and sets `issued_cookie` (a new cookie
// to issue), so dropping the cookie gains nothing.
std::pair<std::string, std::string> Identify(const Rule& rule, const Request& request,
                                             const boost::asio::ip::address& client,
                                             std::string& issued_cookie);

// The limits of every rule an authz request matched (`rules`, at least one), each keyed
// by the client as its rule identifies it.
void AddAuthzLimits(const std::vector<const Rule*>& rules, const Request& request,
                    const boost::asio::ip::address& client, const ServerConfig& config,
                    RequestLimits& limits);

}  // namespace floodgate::server
