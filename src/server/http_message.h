#pragma once

// HTTP messages as the service reads and writes them, and the client's address.
//
// The request type, the response, JSON error bodies, header, cookie and query helpers, and the
// client's address.

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>

#include "server/config.h"
#include "server/headers.h"

namespace floodgate::server {

namespace http = boost::beast::http;
// Request header fields come from a per-connection arena, released between requests:
// Beast allocates one node per header, and with the default allocator those
// allocations measured among the largest user-space costs of a request.
using FieldAllocator = std::pmr::polymorphic_allocator<char>;
using Request = http::request<http::string_body, http::basic_fields<FieldAllocator>>;

// A response as the service builds it: a status, a few headers, a body. Deliberately not
// Beast's message type: its fields allocate one node per header, which measured among the
// largest user-space costs of a request; the server lays this out in one buffer.
struct Response {
  int status = 200;
  unsigned version = 11;  // of the request it answers
  bool keep_alive = true;
  bool head = false;  // answer to HEAD: headers only
  std::string_view content_type = "application/json";
  HeaderList headers;  // names are literals
  std::string body;
  // /v1/authz under delay= (docs/http.md, "Waiting"): the server writes this answer only
  // after `hold`, on the connection's timer. `place` is its place among max_waiting, given
  // back when the last copy of the answer is gone (written, or its client went away).
  std::chrono::microseconds hold{0};
  std::shared_ptr<const void> place;

  int result_int() const { return status; }
  // The value of header `name` (case-insensitive), or "" when absent.
  std::string_view Header(std::string_view name) const;
  // HTTP/1.1 wire format: status line, headers (Server, Content-Type, Content-Length,
  // Connection as needed, then `headers`), blank line, body.
  void SerializeTo(std::string& out) const;
};
using Respond = std::function<void(Response)>;

// What an HttpServer serves: a parsed request and the peer's address in, exactly one response
// out through `respond` (inline or later).
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Thread-safe.
  virtual void Handle(const Request& request, const boost::asio::ip::address& peer,
                      Respond respond) = 0;
  // Counts a response by status for /metrics; the server calls it as it writes. Thread-safe.
  virtual void CountResponse(int status) { (void)status; }
  // Counts a failed accept for /metrics (the server backs off and retries). Thread-safe.
  virtual void CountAcceptError() {}
};

// What a response needs of the request it answers, kept by answers that come later.
struct Reply {
  unsigned version = 11;
  bool keep_alive = true;
  static Reply To(const Request& request) { return {request.version(), request.keep_alive()}; }
};

Response MakeResponse(Reply reply, http::status status, std::string body,
                      std::string_view content_type);
// The same, headers only when the request is a HEAD.
Response MakeResponse(const Request& request, http::status status, std::string body,
                      std::string_view content_type);
void AddHeaders(Response& response, HeaderList headers);

// A JSON error body {"status": N, "code": "...", "message": "..."}.
Response ErrorResponse(Reply reply, http::status status, std::string_view code,
                       std::string_view message);
inline Response ErrorResponse(const Request& request, http::status status, std::string_view code,
                              std::string_view message) {
  return ErrorResponse(Reply::To(request), status, code, message);
}

// The value of request header `name`, or "" when absent.
std::string_view HeaderValue(const Request& request, std::string_view name);
// The value of cookie `name` in the Cookie header, if any.
std::optional<std::string_view> CookieValue(const Request& request, std::string_view name);
// Whether `v` is a UUID as NewUuidV7 writes it (any version).
bool LooksLikeUuid(std::string_view v);
// A new UUIDv7 (RFC 9562), for the anonymous cookie.
std::string NewUuidV7();

// The path of a request target (without the query), and one of its query parameters.
std::string_view PathOf(std::string_view target);
std::string_view QueryParam(std::string_view target, std::string_view name);
inline std::string_view TargetOf(const Request& request) {
  return {request.target().data(), request.target().size()};
}

// The client's address: the peer, unless the peer is a trusted proxy; then the
// right-most address of X-Forwarded-For that is not trusted.
boost::asio::ip::address ClientAddress(const Request& request, const boost::asio::ip::address& peer,
                                       const ServerConfig& config);

}  // namespace floodgate::server
