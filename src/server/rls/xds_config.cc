// envoyproxy/ratelimit's xDS resources turned into the YAML of the config files they stand for.

#include "server/rls/xds_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "server/config_file.h"

namespace floodgate::server::rls {

namespace {

namespace conf = ::ratelimit::config::ratelimit::v3;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

void EmitString(YAML::Emitter& out, const std::string& text) {
  out << YAML::DoubleQuoted << text;
}

void EmitValue(YAML::Emitter& out, const Value& value);

void EmitStruct(YAML::Emitter& out, const Struct& fields) {
  out << YAML::BeginMap;
  // protobuf's map order is unspecified; sorted, the same resource gives the same text.
  std::vector<const std::string*> keys;
  keys.reserve(fields.fields_size());
  for (const auto& [key, unused] : fields.fields()) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  for (const std::string* key : keys) {
    out << YAML::Key;
    EmitString(out, *key);
    out << YAML::Value;
    EmitValue(out, fields.fields().at(*key));
  }
  out << YAML::EndMap;
}

// structpb's AsMap: null, float64, string, bool, map, list.
void EmitValue(YAML::Emitter& out, const Value& value) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
      out << fmt::format("{}", value.number_value());
      return;
    case Value::kStringValue:
      return EmitString(out, value.string_value());
    case Value::kBoolValue:
      out << value.bool_value();
      return;
    case Value::kStructValue:
      return EmitStruct(out, value.struct_value());
    case Value::kListValue:
      out << YAML::BeginSeq;
      for (const Value& element : value.list_value().values()) EmitValue(out, element);
      out << YAML::EndSeq;
      return;
    case Value::kNullValue:
    case Value::KIND_NOT_SET:
      out << YAML::Null;
      return;
  }
}

void EmitPolicy(YAML::Emitter& out, const conf::RateLimitPolicy& policy) {
  out << YAML::BeginMap;
  out << YAML::Key << "unit" << YAML::Value << conf::RateLimitUnit_Name(policy.unit());
  out << YAML::Key << "requests_per_unit" << YAML::Value << policy.requests_per_unit();
  if (policy.unlimited()) out << YAML::Key << "unlimited" << YAML::Value << true;
  if (!policy.name().empty()) {
    out << YAML::Key << "name" << YAML::Value;
    EmitString(out, policy.name());
  }
  if (policy.replaces_size() > 0) {
    out << YAML::Key << "replaces" << YAML::Value << YAML::BeginSeq;
    for (const conf::RateLimitReplace& replace : policy.replaces()) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value;
      EmitString(out, replace.name());
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

// Depth is bounded by protobuf's parser (100 nested messages by default), before this runs.
void EmitDescriptors(YAML::Emitter& out,
                     const google::protobuf::RepeatedPtrField<conf::RateLimitDescriptor>& list) {
  out << YAML::BeginSeq;
  for (const conf::RateLimitDescriptor& descriptor : list) {
    out << YAML::BeginMap;
    out << YAML::Key << "key" << YAML::Value;
    EmitString(out, descriptor.key());
    if (!descriptor.value().empty()) {
      out << YAML::Key << "value" << YAML::Value;
      EmitString(out, descriptor.value());
    }
    if (descriptor.has_rate_limit()) {
      out << YAML::Key << "rate_limit" << YAML::Value;
      EmitPolicy(out, descriptor.rate_limit());
    }
    if (descriptor.descriptors_size() > 0) {
      out << YAML::Key << "descriptors" << YAML::Value;
      EmitDescriptors(out, descriptor.descriptors());
    }
    if (descriptor.shadow_mode()) out << YAML::Key << "shadow_mode" << YAML::Value << true;
    if (descriptor.detailed_metric()) {
      out << YAML::Key << "detailed_metric" << YAML::Value << true;
    }
    if (descriptor.quota_mode()) out << YAML::Key << "quota_mode" << YAML::Value << true;
    if (descriptor.has_metadata() && descriptor.metadata().fields_size() > 0) {
      out << YAML::Key << "metadata" << YAML::Value;
      EmitStruct(out, descriptor.metadata());
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace

std::string YamlOf(const conf::RateLimitConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "domain" << YAML::Value;
  EmitString(out, config.domain());
  if (config.descriptors_size() > 0) {
    out << YAML::Key << "descriptors" << YAML::Value;
    EmitDescriptors(out, config.descriptors());
  }
  out << YAML::EndMap;
  return std::string(out.c_str(), out.size()) + "\n";
}

absl::StatusOr<std::vector<ConfigFile>> ConfigFilesOf(
    const ::envoy::service::discovery::v3::DiscoveryResponse& response) {
  if (static_cast<std::size_t>(response.resources_size()) > kMaxXdsResources) {
    return absl::InvalidArgumentError(
        fmt::format("{} resources in one response: at most {} (as config files in a directory)",
                    response.resources_size(), kMaxXdsResources));
  }
  std::vector<ConfigFile> files;
  files.reserve(response.resources_size());
  std::uint64_t bytes = 0;
  for (const google::protobuf::Any& resource : response.resources()) {
    conf::RateLimitConfig config;
    if (resource.type_url() != kRateLimitConfigType) {
      return absl::InvalidArgumentError(fmt::format(
          "resource of type \"{}\": only {} is read", resource.type_url(), kRateLimitConfigType));
    }
    if (!resource.UnpackTo(&config)) {
      return absl::InvalidArgumentError(
          fmt::format("resource {} of {} is not a RateLimitConfig", files.size() + 1,
                      response.resources_size()));
    }
    ConfigFile file{fmt::format("xds:{}", config.name()), YamlOf(config)};
    bytes += file.text.size();
    if (bytes > kMaxConfigBytes) {
      return absl::InvalidArgumentError(
          fmt::format("the resources make more than {} bytes of config", kMaxConfigBytes));
    }
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace floodgate::server::rls
