#pragma once

// envoyproxy/ratelimit's xDS resources (RateLimitConfig) as the config files they stand for.
//
// docs/envoy.md, "Config from xDS". Upstream turns each resource into the YAML root its file
// loader reads (src/config/config_xds.go) and loads them as files; here each becomes the YAML
// text of that root, read by the same bounded reader and parser as the runtime directory's
// files, so a resource is refused exactly as the file it stands for would be.

#include <absl/status/statusor.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "server/rls/config.h"

namespace floodgate::server::rls {

// The type of every resource upstream's xDS client subscribes to (go-control-plane's
// resource.RateLimitConfigType).
inline constexpr std::string_view kRateLimitConfigType =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

// Resources one response may carry: as many as config files a runtime directory may hold
// (loader.h's kMaxConfigEntries); their YAML together is bounded as the files' bytes are.
inline constexpr std::size_t kMaxXdsResources = 1'000;

// The YAML of one resource, as config_xds.go's ConfigXdsProtoToYaml builds its root: every
// string quoted (a value "null" or "true" stays that text), Go's zero values (an empty value
// or name, false) left out as Go's YAML encoder would see them absent, the unit by its enum
// name (UNKNOWN included: the parser refuses it with upstream's message).
std::string YamlOf(const ::ratelimit::config::ratelimit::v3::RateLimitConfig& config);

// The config files of a response: one per resource, named "xds:<resource name>" in errors.
// Refused: a resource of another type, one that does not unpack (upstream NACKs both without
// loading anything), more than kMaxXdsResources, or YAML past the config files' byte bound.
absl::StatusOr<std::vector<ConfigFile>> ConfigFilesOf(
    const ::envoy::service::discovery::v3::DiscoveryResponse& response);

}  // namespace floodgate::server::rls
