#pragma once

// envoyproxy/ratelimit's environment variables: the table of every one, and their values read as
// upstream reads them.
//
// docs/envoy.md, "Every upstream variable" is generated from the table (a test keeps the two
// equal). Upstream reads its settings with kelseyhightower/envconfig v1.4.0: a variable that is
// set counts even when empty (its default applies only when unset), booleans are Go's
// strconv.ParseBool, integers strconv.ParseInt with base prefixes, durations time.ParseDuration,
// lists split on ',' and maps on ',' then ':'. A value those refuse stops upstream (a panic), and
// stops floodgate with the variable's name.

#include <absl/container/flat_hash_map.h>
#include <absl/status/statusor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace floodgate::server::rls {

// The Go type of a settings field, which decides how its text is parsed.
enum class EnvType { kString, kBool, kInt, kFloat32, kFloat64, kDuration, kList, kMap };

// What floodgate does with a variable.
enum class Support {
  kSame,    // what upstream does with it
  kMapped,  // floodgate's own mechanism does that job (the row says which)
  // A value other than `accepts` stops the start, naming the variable and why: the feature is
  // not built (yet), or never will be.
  kRefused,
  // No effect, as in upstream (a variable upstream reads only under a setting that is refused,
  // or never uses); its value is still parsed, so a malformed one stops the start as upstream's.
  kIgnored,
};

// One variable. `name` ending in '*' is a family (OTEL_*): every variable with that prefix.
struct UpstreamVariable {
  std::string_view name;
  EnvType type;
  // settings.go's `default:` tag; empty: none (Go's zero value).
  std::string_view upstream_default;
  Support support;
  // For docs/envoy.md: what floodgate does with it (kSame: may be empty), or why it is refused.
  std::string_view floodgate;
  // kRefused only: the value that asks for nothing missing (the feature off), accepted when
  // set; nullopt: every value is refused (a setting with no "off").
  std::optional<std::string_view> accepts = std::nullopt;
};

// Every variable, block by block (upstream_variables.cc): the service, Redis, counting, stats,
// gRPC, xDS, memcache and tracing. Names are unique.
std::span<const UpstreamVariable> UpstreamVariables();

// The table as docs/envoy.md carries it (markdown, one row per variable, in table order).
std::string UpstreamVariablesMarkdown();

// A parsed value. kInt is int64; kFloat32/64 double; kDuration nanoseconds; kMap's pairs in
// the order given.
using GoDuration = std::chrono::nanoseconds;
using EnvValue =
    std::variant<std::string, bool, std::int64_t, double, GoDuration, std::vector<std::string>,
                 std::vector<std::pair<std::string, std::string>>>;

// Go's parsers, as envconfig calls them. Errors say what the text should look like.
absl::StatusOr<bool> ParseGoBool(std::string_view text);
absl::StatusOr<std::int64_t> ParseGoInt(std::string_view text);  // ParseInt(text, 0, 64)
absl::StatusOr<double> ParseGoFloat(std::string_view text, int bits);
absl::StatusOr<GoDuration> ParseGoDuration(std::string_view text);
absl::StatusOr<EnvValue> ParseEnvValue(EnvType type, std::string_view text);

// The environment as NAME -> value (set variables only; an empty value is set).
using Environment = absl::flat_hash_map<std::string, std::string>;
// This process's environment.
Environment ProcessEnvironment();

// The environment read through the table: every variable of it that is set, parsed; the
// defaults of the rest. Unknown variables (PATH...) are not looked at.
class UpstreamEnv {
 public:
  // Parses every set variable of `table` (a malformed value is an error naming it) and refuses
  // every kRefused one set to a value other than its default, naming it and the reason.
  static absl::StatusOr<UpstreamEnv> Read(const Environment& environment,
                                          std::span<const UpstreamVariable> table);

  // The value of `name` (a variable of the table, not a family): as set, else its default.
  // Asking for a name not in the table, or as another type, is a programming error (aborts).
  const std::string& String(std::string_view name) const;
  bool Bool(std::string_view name) const;
  std::int64_t Int(std::string_view name) const;
  double Float(std::string_view name) const;
  GoDuration Duration(std::string_view name) const;
  // A kMap's pairs, in the order given.
  const std::vector<std::pair<std::string, std::string>>& Map(std::string_view name) const;
  // Also for the members of a family (DD_ENV of DD_*).
  bool IsSet(std::string_view name) const;
  // The text it was set to ("" when unset), for messages; also for a family's members.
  std::string Text(std::string_view name) const;

 private:
  const EnvValue& Value(std::string_view name) const;
  std::map<std::string, EnvValue, std::less<>> values_;  // every non-family row: set or default
  std::map<std::string, std::string, std::less<>> set_;  // the set ones' text
};

}  // namespace floodgate::server::rls
