// Upstream's descriptor metadata read from YAML, merged, and its dynamic metadata answer.

#include "server/rls/metadata.h"

#include <absl/strings/str_replace.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "common/status_macros.h"
#include "common/strings.h"
#include "server/rls/upstream_settings.h"

namespace floodgate::server::rls {

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";

bool ValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= text.size()) return false;  // cut short
    for (std::size_t k = 1; k <= n; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 (Go's rules).
    constexpr std::array<std::uint32_t, 4> kLeast = {0, 0x80, 0x800, 0x10000};
    if (code < kLeast[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// A plain scalar as yaml.v2 resolves it (YAML 1.1's null, bool, int and float; else text).
Value Resolve(const YAML::Node& node) {
  Value value;
  const std::string& text = node.Scalar();
  const bool plain = node.Tag() == "?" || node.Tag().empty();
  if (!plain || node.Tag() == kStrTag) {
    value.set_string_value(text);
    return value;
  }
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    value.set_null_value(google::protobuf::NULL_VALUE);
    return value;
  }
  for (std::string_view yes :
       {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"}) {
    if (text == yes) {
      value.set_bool_value(true);
      return value;
    }
  }
  for (std::string_view no :
       {"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"}) {
    if (text == no) {
      value.set_bool_value(false);
      return value;
    }
  }
  const std::string digits = absl::StrReplaceAll(text, {{"_", ""}});
  if (auto integer = ParseGoInt(digits); integer.ok()) {
    value.set_number_value(static_cast<double>(*integer));
    return value;
  }
  for (std::string_view inf : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"}) {
    if (text == inf) {
      value.set_number_value(std::numeric_limits<double>::infinity());
      return value;
    }
  }
  for (std::string_view inf : {"-.inf", "-.Inf", "-.INF"}) {
    if (text == inf) {
      value.set_number_value(-std::numeric_limits<double>::infinity());
      return value;
    }
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    value.set_number_value(std::numeric_limits<double>::quiet_NaN());
    return value;
  }
  // yaml.v2's float: digits, an optional fraction and exponent (no hex, no "inf" words).
  const bool float_like = text.find_first_not_of("0123456789+-.eE_") == std::string::npos &&
                          text.find_first_of("0123456789") != std::string::npos;
  if (float_like) {
    if (auto real = ParseGoFloat(digits, 64); real.ok()) {
      value.set_number_value(*real);
      return value;
    }
  }
  value.set_string_value(text);
  return value;
}

// A nested key as Go's fmt %v prints what yaml.v2 decoded it to.
std::string KeyText(const YAML::Node& key) {
  const Value value = Resolve(key);
  switch (value.kind_case()) {
    case Value::kNullValue:
      return "<nil>";
    case Value::kBoolValue:
      return value.bool_value() ? "true" : "false";
    case Value::kNumberValue: {
      const double number = value.number_value();
      if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 1e18) {
        return fmt::format("{}", static_cast<std::int64_t>(number));
      }
      return fmt::format("{}", number);
    }
    default:
      return value.string_value();
  }
}

absl::Status Convert(const YAML::Node& node, int depth, Value& out);

absl::Status ConvertMap(const YAML::Node& node, int depth, bool top, Struct& out) {
  if (depth > kMaxMetadataDepth) {
    return absl::InvalidArgumentError(
        fmt::format("metadata nested deeper than {} levels", kMaxMetadataDepth));
  }
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError("a metadata key must be a scalar");
    }
    // yaml.v2 decodes the top level into map[string]: keys as written; deeper, %v of the key.
    std::string key = top ? entry.first.Scalar() : KeyText(entry.first);
    if (!ValidUtf8(key)) {
      return absl::InvalidArgumentError(fmt::format("invalid UTF-8 in string: {:?}", key));
    }
    Value value;
    FG_RETURN_IF_ERROR(Convert(entry.second, depth + 1, value));
    // A key twice in one mapping is refused before (YamlBudget); the last would win.
    (*out.mutable_fields())[key] = std::move(value);
  }
  return absl::OkStatus();
}

absl::Status Convert(const YAML::Node& node, int depth, Value& out) {
  if (depth > kMaxMetadataDepth) {
    return absl::InvalidArgumentError(
        fmt::format("metadata nested deeper than {} levels", kMaxMetadataDepth));
  }
  if (!node || node.IsNull()) {
    out.set_null_value(google::protobuf::NULL_VALUE);
  } else if (node.IsMap()) {
    FG_RETURN_IF_ERROR(ConvertMap(node, depth, /*top=*/false, *out.mutable_struct_value()));
  } else if (node.IsSequence()) {
    auto& list = *out.mutable_list_value();
    for (const auto& element : node)
      FG_RETURN_IF_ERROR(Convert(element, depth + 1, *list.add_values()));
  } else {
    out = Resolve(node);
    if (out.has_string_value() && !ValidUtf8(out.string_value())) {
      return absl::InvalidArgumentError(
          fmt::format("invalid UTF-8 in string: {:?}", out.string_value()));
    }
  }
  return absl::OkStatus();
}

// Go's prototext of a RateLimitOverride ("requests_per_unit:10 unit:MINUTE"): the fields that
// are set, in field order.
std::string OverrideText(
    const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor::RateLimitOverride&
        limit) {
  std::string text;
  if (limit.requests_per_unit() != 0)
    text = fmt::format("requests_per_unit:{}", limit.requests_per_unit());
  if (limit.unit() != 0) {
    if (!text.empty()) text += ' ';
    text += fmt::format("unit:{}", ::envoy::type::v3::RateLimitUnit_Name(limit.unit()));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Struct>> MetadataFromYaml(const YAML::Node& node) {
  if (!node || node.IsNull()) return nullptr;
  if (!node.IsMap()) return absl::InvalidArgumentError("metadata must be a mapping");
  auto metadata = std::make_shared<Struct>();
  FG_RETURN_IF_ERROR(ConvertMap(node, 1, /*top=*/true, *metadata));
  if (metadata->fields().empty()) return nullptr;
  return metadata;
}

void MergeMetadata(Struct& into, const Struct& from) {
  for (const auto& [key, value] : from.fields()) {
    auto found = into.mutable_fields()->find(key);
    if (found == into.mutable_fields()->end()) {
      (*into.mutable_fields())[key] = value;
    } else if (found->second.has_struct_value() && value.has_struct_value()) {
      MergeMetadata(*found->second.mutable_struct_value(), value.struct_value());
    }
  }
}

Struct RequestMetadata(const ::envoy::service::ratelimit::v3::RateLimitRequest& request) {
  Struct out;
  auto& fields = *out.mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto& descriptors = *fields["descriptors"].mutable_list_value();
  for (const auto& descriptor : request.descriptors()) {
    auto& described = *descriptors.add_values()->mutable_struct_value()->mutable_fields();
    auto& entries = *described["entries"].mutable_list_value();
    for (const auto& entry : descriptor.entries()) {
      entries.add_values()->set_string_value(fmt::format("{}={}", entry.key(), entry.value()));
    }
    if (descriptor.has_limit())
      described["limit"].set_string_value(OverrideText(descriptor.limit()));
    if (descriptor.has_hits_addend()) {
      described["hitsAddend"].set_number_value(
          static_cast<double>(descriptor.hits_addend().value()));
    }
  }
  if (request.hits_addend() != 0) {
    fields["hitsAddend"].set_number_value(static_cast<double>(request.hits_addend()));
  }
  return out;
}

void AddPassedMetadata(Struct& metadata, const std::vector<const Struct*>& passed) {
  Struct merged;
  for (const Struct* metadata : passed) {
    if (metadata != nullptr) MergeMetadata(merged, *metadata);
  }
  if (!merged.fields().empty()) {
    *(*metadata.mutable_fields())["metadata"].mutable_struct_value() = std::move(merged);
  }
}

}  // namespace floodgate::server::rls
