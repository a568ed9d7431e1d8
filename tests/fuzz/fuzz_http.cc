// libFuzzer: the HTTP request -> response path of `floodgate serve`.
//
// Arbitrary bytes through Beast's request parser with the server's limits, and every request it
// accepts through the service (rules, identities, JSON bodies) on a memory store. Each request must
// get exactly one well-formed response.
#include <floodgate/memory_store.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <cstdlib>
#include <memory_resource>
#include <optional>
#include <string>

#include "server/config.h"
#include "server/service.h"

namespace {

namespace http = boost::beast::http;
using floodgate::server::Service;

// The admin token the seeds send (corpus/fuzz_http: the /v1/keys/... ones), in a file of
// its own as the config wants it.
std::string AdminTokenFile() {
  char path[] = "/tmp/fuzz_http_token.XXXXXX";
  const int fd = mkstemp(path);
  constexpr std::string_view kToken = "fuzz-admin-token-0123456789\n";
  if (fd < 0 || write(fd, kToken.data(), kToken.size()) != static_cast<ssize_t>(kToken.size())) {
    std::abort();
  }
  close(fd);
  return path;
}

Service& TheService() {
  static Service* service = [] {
    const std::string token_file = AdminTokenFile();
    auto config = floodgate::server::ParseConfig("admin: {token_file: " + token_file + "}\n" + R"(
trusted_proxies: [127.0.0.1/32, ::1/128]
rules:
  - name: login
    match: {path_prefix: /login, methods: [POST]}
    identify: ip
    policy: sliding_log:5/15m
  - name: api
    match: {path_prefix: /api}
    identify: "ip+header:X-Api-Key"
    policy: gcra:10/1s,burst=5
  - name: web
    match: {path_prefix: /}
    identify: cookie:fg_id
    policy: sliding_window:100/1m
)",
                                                 "fuzz.yaml");
    if (!config.ok()) std::abort();
    return new Service(std::make_shared<floodgate::MemoryStore>(),
                       std::make_shared<const floodgate::server::ServerConfig>(*config));
  }();
  return *service;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Service& service = TheService();
  const auto peer = boost::asio::ip::make_address("127.0.0.1");
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Several requests may be pipelined in one input, as on a keep-alive connection.
  for (int requests = 0; requests < 8 && !bytes.empty(); ++requests) {
    std::pmr::monotonic_buffer_resource arena;
    http::request_parser<http::string_body, floodgate::server::FieldAllocator> parser(
        std::piecewise_construct, std::make_tuple(),
        std::make_tuple(floodgate::server::FieldAllocator(&arena)));
    parser.eager(true);
    parser.header_limit(8 * 1024);
    parser.body_limit(64 * 1024);
    boost::beast::error_code ec;
    const std::size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec || !parser.is_done()) return 0;  // the server answers 400/413/431 or waits
    bytes.remove_prefix(used);
    int answers = 0;
    std::string wire;
    service.Handle(parser.get(), peer, [&](floodgate::server::Response response) {
      ++answers;
      if (response.status < 100 || response.status > 599) std::abort();
      // No header value may end its line early: request text echoed in a header once
      // wrote headers of the client's choosing.
      for (const auto& [name, value] : response.headers) {
        if (value.find_first_of("\r\n") != std::string_view::npos) std::abort();
      }
      response.SerializeTo(wire);
    });
    if (answers != 1) std::abort();  // the memory store answers inline, exactly once
    if (!wire.starts_with("HTTP/1.1 ") || wire.find("\r\n\r\n") == std::string::npos) {
      std::abort();
    }
  }
  return 0;
}
