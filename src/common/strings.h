#pragma once

// Crossing between std::string_view and Debian's absl::string_view, which do not convert.
//
// Debian builds abseil with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0), which does not convert to or from std::string_view. Our code speaks
// std::string_view and formats with fmt; these helpers cross the boundary.

#include <absl/status/status.h>
#include <absl/strings/string_view.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate {

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

// "host:port", with an IPv6 address in brackets ("[::1]:6379"), for messages and URLs.
inline std::string HostPort(std::string_view host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string out = v6 ? "[" : "";
  out.append(host).append(v6 ? "]:" : ":").append(std::to_string(port));
  return out;
}

// %XX escapes for everything but unreserved characters (RFC 3986), e.g. a password in a
// URL's userinfo.
inline std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// The status message as a std::string_view (valid while the status lives).
inline std::string_view MessageOf(const absl::Status& status) { return ToStd(status.message()); }

// A whole decimal integer: digits only (no sign, no spaces), no overflow.
template <class Int>
bool ParseDecimal(std::string_view text, Int& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

// Calls `visit(name, value)` for each `name=value` of a URL query ("a=1&b=2"), stopping
// at the first error it returns. A pair without '=' has an empty value.
template <class Visit>
absl::Status ForEachQueryOption(std::string_view query, Visit visit) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const std::string_view value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (absl::Status status = visit(pair.substr(0, eq), value); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// Calls `visit(item)` for each item of a `separator`-separated list, trimmed of spaces;
// empty items are skipped ("a, b;c" style header values).
template <class Visit>
void ForEachItem(std::string_view list, char separator, Visit visit) {
  while (!list.empty()) {
    const std::size_t at = list.find(separator);
    std::string_view item = list.substr(0, at);
    list = at == std::string_view::npos ? std::string_view() : list.substr(at + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) visit(item);
  }
}

}  // namespace floodgate
