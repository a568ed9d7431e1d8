// HTTP messages: responses, errors, header, cookie and query helpers, the client's address.

#include "server/http_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "common/strings.h"

namespace floodgate::server {

namespace ip = boost::asio::ip;

namespace {

// Boost 1.74's Beast speaks boost::string_view.
boost::beast::string_view BeastView(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

Response MakeResponse(Reply reply, http::status status, std::string body,
                      std::string_view content_type) {
  Response response;
  response.status = static_cast<int>(status);
  response.version = reply.version;
  response.keep_alive = reply.keep_alive;
  response.content_type = content_type;
  response.body = std::move(body);
  return response;
}

Response MakeResponse(const Request& request, http::status status, std::string body,
                      std::string_view content_type) {
  Response response = MakeResponse(Reply::To(request), status, std::move(body), content_type);
  response.head = request.method() == http::verb::head;
  return response;
}

Response ErrorResponse(Reply reply, http::status status, std::string_view code,
                       std::string_view message) {
  nlohmann::ordered_json body = {
      {"status", static_cast<int>(status)}, {"code", code}, {"message", message}};
  return MakeResponse(reply, status,
                      body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
                      "application/json");
}

void AddHeaders(Response& response, HeaderList headers) {
  for (auto& header : headers) response.headers.push_back(std::move(header));
}

std::string_view HeaderValue(const Request& request, std::string_view name) {
  const auto it = request.find(BeastView(name));
  if (it == request.end()) return {};
  return {it->value().data(), it->value().size()};
}

// The value of cookie `name` in the Cookie header, if any.
std::optional<std::string_view> CookieValue(const Request& request, std::string_view name) {
  std::optional<std::string_view> found;
  for (auto [it, end] = request.equal_range(http::field::cookie); it != end; ++it) {
    ForEachItem({it->value().data(), it->value().size()}, ';', [&](std::string_view pair) {
      const std::size_t eq = pair.find('=');
      if (!found && eq != std::string_view::npos && pair.substr(0, eq) == name) {
        found = pair.substr(eq + 1);
      }
    });
  }
  return found;
}

// Only values we could have issued count as our cookie: anything else is ignored, so
// a forged cookie cannot smuggle bytes into store keys.
bool LooksLikeUuid(std::string_view v) {
  if (v.size() != 36) return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (v[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(v[i]))) return false;
  }
  return true;
}

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view QueryParam(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view found;
  (void)ForEachQueryOption(target.substr(q + 1), [&](std::string_view n, std::string_view v) {
    if (n == name) found = v;
    return absl::OkStatus();
  });
  return found;
}

std::string_view Response::Header(std::string_view name) const {
  const auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  };
  if (same(name, "Content-Type")) return content_type;
  for (const auto& [n, v] : headers) {
    if (same(n, name)) return v;
  }
  return {};
}

void Response::SerializeTo(std::string& out) const {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  out.clear();
  out.append("HTTP/1.1 ");
  out.append(std::to_string(status));
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out.append("\r\nServer: floodgate");
  // 1xx, 204 and 304 carry no body, and must not announce one (RFC 9110, 8.6).
  const bool bodiless = status < 200 || status == 204 || status == 304;
  if (!bodiless) {
    out.append("\r\nContent-Type: ");
    out.append(content_type);
    out.append("\r\nContent-Length: ");
    out.append(std::to_string(body.size()));
  }
  if (!keep_alive) {
    out.append("\r\nConnection: close");
  } else if (version < 11) {
    out.append("\r\nConnection: keep-alive");  // HTTP/1.0 closes unless told otherwise
  }
  out.append("\r\n");
  for (const auto& [name, value] : headers) {
    out.append(name);
    out.append(": ");
    out.append(value);
    out.append("\r\n");
  }
  out.append("\r\n");
  if (!head && !bodiless) out.append(body);
}

std::string NewUuidV7() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const std::uint64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const std::uint64_t a = random(), b = random();
  // 48-bit unix ms | version 7 | 12 random bits | variant 10 | 62 random bits.
  const std::uint64_t high = (ms << 16) | 0x7000 | (a & 0x0fff);
  const std::uint64_t low = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff,
                     high & 0xffff, low >> 48, low & 0xffffffffffffULL);
}

ip::address ClientAddress(const Request& request, const ip::address& peer,
                          const ServerConfig& config) {
  if (!config.Trusted(peer)) return peer;
  // Walk X-Forwarded-For from the right: each hop appended the address it saw; the
  // first one that is not a trusted proxy is the client. All trusted: the left-most.
  std::vector<std::string_view> hops;
  for (auto [it, end] = request.equal_range("X-Forwarded-For"); it != end; ++it) {
    ForEachItem({it->value().data(), it->value().size()}, ',',  // names match in any case
                [&](std::string_view hop) { hops.push_back(hop); });
  }
  ip::address client = peer;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    boost::system::error_code ec;
    const ip::address hop = ip::make_address(std::string(*it), ec);
    if (ec) break;  // garbage: trust nothing further left
    client = hop;
    if (!config.Trusted(hop)) break;
  }
  return client;
}

}  // namespace floodgate::server
