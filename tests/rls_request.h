#pragma once

// RateLimitRequests built from a short description, for the RLS tests.
//
// For the engine and the served process: entries per descriptor, and optionally a descriptor's own
// hits_addend and limit override.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::testing {

// One descriptor of `entries`, as RlsConfig::Find takes it.
inline ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor Descriptor(
    std::initializer_list<std::pair<std::string, std::string>> entries) {
  ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor descriptor;
  for (const auto& [key, value] : entries) {
    auto* entry = descriptor.add_entries();
    entry->set_key(key);
    entry->set_value(value);
  }
  return descriptor;
}

struct RlsDescriptor {
  std::vector<std::pair<std::string, std::string>> entries;
  std::optional<std::uint64_t> hits_addend;  // the descriptor's own
  // The descriptor's limit override: requests per unit, and the unit.
  std::optional<std::pair<std::uint32_t, ::envoy::type::v3::RateLimitUnit>> limit;
};

inline ::envoy::service::ratelimit::v3::RateLimitRequest RlsRequest(
    const std::string& domain, const std::vector<RlsDescriptor>& descriptors,
    std::uint32_t hits_addend = 0) {
  ::envoy::service::ratelimit::v3::RateLimitRequest request;
  request.set_domain(domain);
  request.set_hits_addend(hits_addend);
  for (const RlsDescriptor& d : descriptors) {
    auto& descriptor = *request.add_descriptors();
    for (const auto& [key, value] : d.entries) {
      auto* entry = descriptor.add_entries();
      entry->set_key(key);
      entry->set_value(value);
    }
    if (d.hits_addend) descriptor.mutable_hits_addend()->set_value(*d.hits_addend);
    if (d.limit) {
      descriptor.mutable_limit()->set_requests_per_unit(d.limit->first);
      descriptor.mutable_limit()->set_unit(d.limit->second);
    }
  }
  return request;
}

}  // namespace floodgate::testing
