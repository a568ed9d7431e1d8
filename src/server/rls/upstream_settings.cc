// Upstream's environment variables parsed as envconfig v1.4.0 and Go's strconv parse them.

#include "server/rls/upstream_settings.h"

#include <absl/strings/ascii.h>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/strings.h"

extern char** environ;

namespace floodgate::server::rls {

namespace {

// Go's strings.Split: every piece, empty ones included.
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  for (std::size_t at = text.find(separator);; at = text.find(separator)) {
    pieces.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return pieces;
    text.remove_prefix(at + 1);
  }
}

std::string LowerCopy(std::string_view text) {
  std::string out(text);
  absl::AsciiStrToLower(&out);
  return out;
}

char Lower(char c) { return static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(c))); }

// Go's strconv.underscoreOK: '_' only between digits, or between a base prefix and a digit.
bool UnderscoreOk(std::string_view s) {
  char saw = '^';
  std::size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0' &&
      (Lower(s[1]) == 'b' || Lower(s[1]) == 'o' || Lower(s[1]) == 'x')) {
    i = 2;
    saw = '0';
    hex = Lower(s[1]) == 'x';
  }
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if ((c >= '0' && c <= '9') || (hex && Lower(c) >= 'a' && Lower(c) <= 'f')) {
      saw = '0';
      continue;
    }
    if (c == '_') {
      if (saw != '0') return false;
      saw = '_';
      continue;
    }
    if (saw == '_') return false;
    saw = '!';
  }
  return saw != '_';
}

absl::Status Malformed(std::string_view text, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("\"{}\" is not {}", text, what));
}

std::string_view TypeName(EnvType type) {
  switch (type) {
    case EnvType::kString:
      return "string";
    case EnvType::kBool:
      return "bool";
    case EnvType::kInt:
      return "int";
    case EnvType::kFloat32:
      return "float32";
    case EnvType::kFloat64:
      return "float64";
    case EnvType::kDuration:
      return "duration";
    case EnvType::kList:
      return "list";
    case EnvType::kMap:
      return "map";
  }
  return "?";
}

bool IsFamily(std::string_view name) { return name.ends_with('*'); }

// A variable's value while unset: its default, or Go's zero value when it has none (envconfig
// leaves the field alone then).
absl::StatusOr<EnvValue> Unset(const UpstreamVariable& row) {
  if (!row.upstream_default.empty()) return ParseEnvValue(row.type, row.upstream_default);
  switch (row.type) {
    case EnvType::kBool:
      return EnvValue(false);
    case EnvType::kInt:
      return EnvValue(std::int64_t{0});
    case EnvType::kFloat32:
    case EnvType::kFloat64:
      return EnvValue(0.0);
    case EnvType::kDuration:
      return EnvValue(GoDuration(0));
    default:
      return ParseEnvValue(row.type, "");
  }
}

}  // namespace

absl::StatusOr<bool> ParseGoBool(std::string_view text) {
  for (std::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return Malformed(text, "a boolean (1 t T TRUE true True 0 f F FALSE false False)");
}

absl::StatusOr<std::int64_t> ParseGoInt(std::string_view text) {
  const auto bad = [&] {
    return Malformed(text,
                     "an integer (Go's ParseInt: decimal, 0x hex, 0o or leading-0 octal, "
                     "0b binary)");
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return bad();
  int base = 10;
  if (s[0] == '0') {
    if (s.size() >= 3 && Lower(s[1]) == 'b') {
      base = 2;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && Lower(s[1]) == 'o') {
      base = 8;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && Lower(s[1]) == 'x') {
      base = 16;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
  }
  std::uint64_t n = 0;
  bool underscores = false;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  for (const char c : s) {
    int digit = 0;
    if (c == '_') {
      underscores = true;
      continue;
    }
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (Lower(c) >= 'a' && Lower(c) <= 'z') {
      digit = Lower(c) - 'a' + 10;
    } else {
      return bad();
    }
    if (digit >= base) return bad();
    if (n > (kMax - static_cast<std::uint64_t>(digit)) / static_cast<std::uint64_t>(base)) {
      return Malformed(text, "within a 64-bit integer's range");
    }
    n = n * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(digit);
  }
  if (underscores && !UnderscoreOk(text)) return bad();
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!negative && n > kLimit) return Malformed(text, "within a 64-bit integer's range");
  if (negative && n > kLimit + 1) return Malformed(text, "within a 64-bit integer's range");
  if (negative)
    return n == kLimit + 1 ? std::numeric_limits<std::int64_t>::min()
                           : -static_cast<std::int64_t>(n);
  return static_cast<std::int64_t>(n);
}

absl::StatusOr<double> ParseGoFloat(std::string_view text, int bits) {
  const auto bad = [&] { return Malformed(text, "a number (Go's ParseFloat)"); };
  const std::string lower = LowerCopy(text);
  std::string_view body = lower;
  double sign = 1;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1 : 1;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (text == "NaN" || lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  // Decimal: digits [. digits] [e [sign] digits], a digit somewhere before the exponent; or
  // a hexadecimal float (0x1p-2), which needs its 'p' exponent. No spaces, no '_' (Go allows
  // it only with a base prefix).
  const bool hex = body.starts_with("0x");
  std::size_t i = hex ? 2 : 0;
  bool digits = false;
  const auto is_digit = [&](char c) {
    return (c >= '0' && c <= '9') || (hex && c >= 'a' && c <= 'f');
  };
  while (i < body.size() && is_digit(body[i])) ++i, digits = true;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && is_digit(body[i])) ++i, digits = true;
  }
  if (!digits) return bad();
  const char exponent = hex ? 'p' : 'e';
  if (i < body.size() && body[i] == exponent) {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    const std::size_t start = i;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9') ++i;
    if (i == start) return bad();
  } else if (hex) {
    return bad();
  }
  if (i != body.size()) return bad();
  errno = 0;
  const std::string copy(text);
  const double value = std::strtod(copy.c_str(), nullptr);
  const double max =
      bits == 32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  if (errno == ERANGE && std::isinf(value)) return Malformed(text, "within a float's range");
  if (std::fabs(value) > max) return Malformed(text, "within a float32's range");
  return value;
}

absl::StatusOr<GoDuration> ParseGoDuration(std::string_view text) {
  const auto bad = [&] {
    return Malformed(text,
                     "a duration (Go's ParseDuration: 300ms, 1.5h, 1h30m; units ns us ms s "
                     "m h; a bare number only if 0)");
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return GoDuration(0);
  if (s.empty()) return bad();
  // Nanoseconds in unsigned 64 bits, then the sign, as Go does (its range is int64's).
  std::uint64_t total = 0;
  constexpr std::uint64_t kLimit = 1ULL << 63;
  const auto overflow = [&] {
    return Malformed(text, "within a duration's range (about 292 years)");
  };
  while (!s.empty()) {
    std::uint64_t whole = 0;
    std::size_t i = 0;
    bool any = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (whole > (kLimit - static_cast<std::uint64_t>(s[i] - '0')) / 10) return overflow();
      whole = whole * 10 + static_cast<std::uint64_t>(s[i] - '0');
      ++i;
      any = true;
    }
    // The fraction, as Go keeps it: digits until they no longer fit, scaled at the end.
    std::uint64_t fraction = 0;
    double scale = 1;
    if (i < s.size() && s[i] == '.') {
      ++i;
      bool overflowed = false;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        any = true;
        if (!overflowed) {
          if (fraction > (std::numeric_limits<std::int64_t>::max() - 9) / 10) {
            overflowed = true;
          } else {
            fraction = fraction * 10 + static_cast<std::uint64_t>(s[i] - '0');
            scale *= 10;
          }
        }
        ++i;
      }
    }
    if (!any) return bad();
    std::size_t u = i;
    while (u < s.size() && s[u] != '.' && !(s[u] >= '0' && s[u] <= '9')) ++u;
    const std::string_view unit = s.substr(i, u - i);
    std::uint64_t per = 0;
    if (unit == "ns") {
      per = 1;
    } else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") {
      per = 1'000;
    } else if (unit == "ms") {
      per = 1'000'000;
    } else if (unit == "s") {
      per = 1'000'000'000;
    } else if (unit == "m") {
      per = 60'000'000'000ULL;
    } else if (unit == "h") {
      per = 3'600'000'000'000ULL;
    } else {
      return bad();
    }
    if (whole > kLimit / per) return overflow();
    std::uint64_t v = whole * per;
    if (fraction > 0) {
      v += static_cast<std::uint64_t>(static_cast<double>(fraction) *
                                      (static_cast<double>(per) / scale));
      if (v > kLimit) return overflow();
    }
    total += v;
    if (total > kLimit) return overflow();
    s.remove_prefix(u);
  }
  if (!negative && total > kLimit - 1) return overflow();
  if (total == 0) return GoDuration(0);
  return GoDuration(negative ? -static_cast<std::int64_t>(total - 1) - 1
                             : static_cast<std::int64_t>(total));
}

absl::StatusOr<EnvValue> ParseEnvValue(EnvType type, std::string_view text) {
  // envconfig: a list or map whose text is all spaces is empty; otherwise split, untrimmed.
  const bool blank = text.find_first_not_of(" \t\n\v\f\r") == std::string_view::npos;
  switch (type) {
    case EnvType::kString:
      return EnvValue(std::string(text));
    case EnvType::kBool: {
      auto v = ParseGoBool(text);
      if (!v.ok()) return v.status();
      return EnvValue(*v);
    }
    case EnvType::kInt: {
      auto v = ParseGoInt(text);
      if (!v.ok()) return v.status();
      return EnvValue(*v);
    }
    case EnvType::kFloat32:
    case EnvType::kFloat64: {
      auto v = ParseGoFloat(text, type == EnvType::kFloat32 ? 32 : 64);
      if (!v.ok()) return v.status();
      return EnvValue(*v);
    }
    case EnvType::kDuration: {
      auto v = ParseGoDuration(text);
      if (!v.ok()) return v.status();
      return EnvValue(*v);
    }
    case EnvType::kList: {
      std::vector<std::string> items;
      if (!blank) {
        for (std::string_view item : Split(text, ',')) items.emplace_back(item);
      }
      return EnvValue(std::move(items));
    }
    case EnvType::kMap: {
      std::vector<std::pair<std::string, std::string>> items;
      if (!blank) {
        for (std::string_view item : Split(text, ',')) {
          const std::vector<std::string_view> kv = Split(item, ':');
          if (kv.size() != 2) {
            return absl::InvalidArgumentError(fmt::format(
                "invalid map item: \"{}\" (items are key:value, separated by ',')", item));
          }
          items.emplace_back(kv[0], kv[1]);
        }
      }
      return EnvValue(std::move(items));
    }
  }
  return absl::InternalError("unknown type");
}

Environment ProcessEnvironment() {
  Environment environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    environment.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return environment;
}

absl::StatusOr<UpstreamEnv> UpstreamEnv::Read(const Environment& environment,
                                              std::span<const UpstreamVariable> table) {
  UpstreamEnv env;
  const auto refuse = [](std::string_view name, std::string_view value, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("{}=\"{}\": {}", name, value, why));
  };
  // Checks one set variable of a row: parsed, then refused when it asks for what is not built.
  const auto check = [&](const UpstreamVariable& row, const std::string& name,
                         const std::string& text) -> absl::StatusOr<EnvValue> {
    auto value = ParseEnvValue(row.type, text);
    if (!value.ok()) return refuse(name, text, MessageOf(value.status()));
    if (row.support == Support::kRefused) {
      const auto harmless = row.accepts.has_value()
                                ? ParseEnvValue(row.type, *row.accepts)
                                : absl::StatusOr<EnvValue>(absl::NotFoundError("none"));
      if (!harmless.ok() || *harmless != *value) {
        return refuse(name, text, fmt::format("not supported: {}", row.floodgate));
      }
    }
    return value;
  };
  for (const UpstreamVariable& row : table) {
    if (IsFamily(row.name)) {
      const std::string_view prefix = row.name.substr(0, row.name.size() - 1);
      for (const auto& [name, text] : environment) {
        if (!name.starts_with(prefix)) continue;
        // A family never shadows a variable of its own row (DD_ vs a listed one).
        bool listed = false;
        for (const UpstreamVariable& other : table) listed |= other.name == name;
        if (listed) continue;
        auto value = check(row, name, text);
        if (!value.ok()) return value.status();
        env.set_[name] = text;  // a family's members are asked for by IsSet and Text only
      }
      continue;
    }
    const std::string name(row.name);
    const auto it = environment.find(name);
    if (it == environment.end()) {
      auto fallback = Unset(row);
      if (!fallback.ok()) {
        return absl::InternalError(fmt::format("{}: default \"{}\" of type {} does not parse", name,
                                               row.upstream_default, TypeName(row.type)));
      }
      env.values_[name] = *std::move(fallback);
      continue;
    }
    auto value = check(row, name, it->second);
    if (!value.ok()) return value.status();
    env.values_[name] = *std::move(value);
    env.set_[name] = it->second;
  }
  return env;
}

const EnvValue& UpstreamEnv::Value(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) {
    fmt::print(stderr, "upstream variable {} is not in the table\n", name);
    std::abort();
  }
  return it->second;
}

const std::string& UpstreamEnv::String(std::string_view name) const {
  return std::get<std::string>(Value(name));
}
bool UpstreamEnv::Bool(std::string_view name) const { return std::get<bool>(Value(name)); }
std::int64_t UpstreamEnv::Int(std::string_view name) const {
  return std::get<std::int64_t>(Value(name));
}
double UpstreamEnv::Float(std::string_view name) const { return std::get<double>(Value(name)); }
GoDuration UpstreamEnv::Duration(std::string_view name) const {
  return std::get<GoDuration>(Value(name));
}
const std::vector<std::pair<std::string, std::string>>& UpstreamEnv::Map(
    std::string_view name) const {
  return std::get<std::vector<std::pair<std::string, std::string>>>(Value(name));
}
bool UpstreamEnv::IsSet(std::string_view name) const { return set_.contains(name); }
std::string UpstreamEnv::Text(std::string_view name) const {
  const auto it = set_.find(name);
  return it == set_.end() ? "" : it->second;
}

std::string UpstreamVariablesMarkdown() {
  std::string out =
      "| Variable | Type | Upstream default | floodgate |\n| --- | --- | --- | --- |\n";
  for (const UpstreamVariable& row : UpstreamVariables()) {
    std::string_view status;
    std::string accepted;
    switch (row.support) {
      case Support::kSame:
        status = "same";
        break;
      case Support::kMapped:
        status = "mapped";
        break;
      case Support::kRefused:
        status = "**refused**";
        if (row.accepts.has_value()) {
          accepted =
              row.accepts->empty() ? " (but `\"\"`)" : fmt::format(" (but `{}`)", *row.accepts);
        }
        break;
      case Support::kIgnored:
        status = "ignored, as upstream";
        break;
    }
    const std::string fallback =
        row.upstream_default.empty() ? "unset" : fmt::format("`{}`", row.upstream_default);
    out += fmt::format("| `{}` | {} | {} | {}{}{}{} |\n", row.name, TypeName(row.type), fallback,
                       status, accepted, row.floodgate.empty() ? "" : ": ", row.floodgate);
  }
  return out;
}

}  // namespace floodgate::server::rls
