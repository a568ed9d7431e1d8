// The loaded RLS config as upstream's debug endpoint /rlconfig prints it.

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "server/rls/config.h"

namespace floodgate::server::rls {

namespace {

using RateLimit = ::envoy::service::ratelimit::v3::RateLimitResponse::RateLimit;

void DumpNode(const DescriptorNode& node, std::string& out) {
  if (node.limit.has_value()) {
    const RlsLimit& limit = *node.limit;
    // Upstream's unlimited limits and floodgate's period: ones have no unit: UNKNOWN.
    const Unit unit = limit.unlimited ? RateLimit::UNKNOWN : limit.unit;
    fmt::format_to(std::back_inserter(out),
                   "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}\n",
                   limit.stats_key, RateLimit::Unit_Name(unit), limit.requests_per_unit,
                   limit.shadow, limit.quota);
  }
  std::vector<const std::string*> keys;
  keys.reserve(node.children.size());
  for (const auto& [key, child] : node.children) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  for (const std::string* key : keys) DumpNode(*node.children.at(*key), out);
}

}  // namespace

std::string RlsConfig::Dump() const {
  std::vector<const std::string*> names;
  names.reserve(domains_.size());
  for (const auto& [name, domain] : domains_) names.push_back(&name);
  std::sort(names.begin(), names.end(), [](const auto* a, const auto* b) { return *a < *b; });
  std::string out;
  for (const std::string* name : names) DumpNode(domains_.at(*name)->root, out);
  return out;
}

}  // namespace floodgate::server::rls
