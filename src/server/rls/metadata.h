#pragma once

// Upstream's `metadata` descriptor key and its RESPONSE_DYNAMIC_METADATA answer, as protobuf
// Structs.
//
// docs/envoy.md, "Dynamic metadata". Read from envoyproxy/ratelimit's config_impl.go
// (parseMetadata) and service/ratelimit.go (ratelimitToMetadata, mergeMetadata) at f2fb15770f7f.

#include <absl/status/statusor.h>
#include <google/protobuf/struct.pb.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::server::rls {

// How deep a descriptor's metadata may nest: protobuf parsers (Envoy's among them) refuse
// messages nested past 100 levels, and a Struct level is two messages (Struct, Value).
inline constexpr int kMaxMetadataDepth = 32;

// A descriptor's `metadata:` mapping as upstream's yaml.v2 decodes it and structpb.NewStruct
// converts it: plain scalars resolved as YAML 1.1 (null, bool, int, float) and numbers as
// doubles; nested keys as Go's %v prints them (`yes:` is "true"). nullptr for an empty or null
// mapping. Errors (a list or scalar in its place, invalid UTF-8, past kMaxMetadataDepth) carry
// no file or line: the caller adds them.
absl::StatusOr<std::shared_ptr<const google::protobuf::Struct>> MetadataFromYaml(
    const YAML::Node& node);

// Upstream's mergeMetadata: `from`'s fields join `into`'s; a field both have stays `into`'s,
// but two Structs merge field by field.
void MergeMetadata(google::protobuf::Struct& into, const google::protobuf::Struct& from);

// Upstream's ratelimitToMetadata, in two steps: the request's part (domain, each descriptor's
// "key=value" entries, its limit and hits_addend, the request's hits_addend), built before the
// store answers; then, under "metadata", the merged metadata of the limits that passed, in
// request order (nullptr: a descriptor without any).
google::protobuf::Struct RequestMetadata(
    const ::envoy::service::ratelimit::v3::RateLimitRequest& request);
void AddPassedMetadata(google::protobuf::Struct& metadata,
                       const std::vector<const google::protobuf::Struct*>& passed);

}  // namespace floodgate::server::rls
