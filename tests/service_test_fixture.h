#pragma once

// What the HTTP service's tests share: a config with four rules, a Service on memory://.
//
// The Service is called without sockets.

#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/strings.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/service.h"
#include "test_time.h"

namespace floodgate::server {

using ::testing::HasSubstr;
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

inline constexpr const char* kConfig = R"(
listen: 127.0.0.1:0
trusted_proxies: [10.0.0.0/8, ::1/128, 'fd00::/8']
rules:
  - name: login
    match: {path_prefix: /login, methods: [post]}
    identify: ip
    policy: sliding_log:3/15m
  - name: api
    match: {path_prefix: /api}
    identify: cookie:fgid
    policy: fixed_window:2/1h
  - name: keyed
    match: {path_prefix: /keyed}
    identify: ip+header:X-Api-Key
    policy: fixed_window:1/1h
    cost: 1
  - name: byheader
    match: {path_prefix: /byheader}
    identify: header:X-Api-Key
    policy: fixed_window:1/1h
)";

// ---- request handling, without sockets -------------------------------------------------

// memory:// whose clock stands still at T0 (13 min into an hour): a test's requests are
// all decided at one instant, however long the machine takes between them (with the
// system clock, gcra:2/1s gave a unit back to a third request made 500 ms after the
// first, and an hour's window could end between two requests).
inline std::shared_ptr<MemoryStore> StoreAtOneInstant() {
  MemoryStoreOptions options;
  options.clock = [] { return TimePoint(std::chrono::microseconds(T0)); };
  return std::make_shared<MemoryStore>(std::move(options));
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() : ServiceTest(kConfig) {}
  explicit ServiceTest(const char* config)
      : store_(StoreAtOneInstant()),
        service_(store_, std::make_shared<const ServerConfig>(*ParseConfig(config, "t.yaml"))) {}

  Response Call(http::verb method, std::string target, std::string body = "",
                std::vector<std::pair<std::string, std::string>> headers = {},
                const char* peer = "127.0.0.1") {
    Request request(method, target, 11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    request.body() = std::move(body);
    request.prepare_payload();
    std::optional<Response> response;
    service_.Handle(request, asio::ip::make_address(peer),
                    [&](Response r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());  // memory:// answers inline
    return response.value_or(Response{});
  }
  static nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }
  static std::string Header(const Response& r, const char* name) {
    return std::string(r.Header(name));
  }

  std::shared_ptr<MemoryStore> store_;
  Service service_;
};

}  // namespace floodgate::server
