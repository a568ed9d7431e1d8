#pragma once

// What the tests of the `ratelimit` process (upstream's mode) share: a config root laid out as
// upstream's compose file mounts it, a set of free loopback ports, and the compose file's
// environment.
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "redis_server.h"

namespace floodgate::testing {

// <root>/ratelimit/config/<file>, as RUNTIME_ROOT=<root> RUNTIME_SUBDIRECTORY=ratelimit read it.
class ConfigRoot {
 public:
  ConfigRoot() {
    std::string dir = (std::filesystem::temp_directory_path() / "ratelimit-root-XXXXXX").string();
    if (mkdtemp(dir.data()) != nullptr) root_ = dir;
    std::filesystem::create_directories(root_ / "ratelimit" / "config");
  }
  ~ConfigRoot() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ConfigRoot(const ConfigRoot&) = delete;
  ConfigRoot& operator=(const ConfigRoot&) = delete;
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(root_ / "ratelimit" / "config" / name) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

// HOST:PORT, GRPC_HOST:GRPC_PORT and DEBUG_HOST:DEBUG_PORT moved to free loopback ports.
struct Ports {
  int http = FreeLoopbackPort();
  int grpc = FreeLoopbackPort();
  int debug = FreeLoopbackPort();
};

// docker-compose-example.yml's environment for the `ratelimit` service, every variable it sets,
// with Redis and the config root of the test, the ports moved and the hosts on loopback.
// USE_STATSD=true there, to a `statsd` host: false here (upstream_stats_process_test.cc sends
// statsd to the test's own listeners), so the stats go to the logging sink on stderr.
inline std::vector<std::string> ComposeEnvironment(const RedisServer& redis,
                                                   const ConfigRoot& config, const Ports& ports) {
  return {"USE_STATSD=false",
          "STATSD_HOST=statsd",
          "STATSD_PORT=9125",
          "LOG_LEVEL=debug",
          "REDIS_SOCKET_TYPE=tcp",
          fmt::format("REDIS_URL=127.0.0.1:{}", redis.port()),
          "RUNTIME_ROOT=" + config.root(),
          "RUNTIME_SUBDIRECTORY=ratelimit",
          "RUNTIME_WATCH_ROOT=false",
          "CONFIG_TYPE=FILE",
          "CONFIG_GRPC_XDS_NODE_ID=test-node-id",
          "CONFIG_GRPC_XDS_SERVER_URL=ratelimit-xds-config-server:18000",
          "HOST=127.0.0.1",
          "GRPC_HOST=127.0.0.1",
          "DEBUG_HOST=127.0.0.1",
          fmt::format("PORT={}", ports.http),
          fmt::format("GRPC_PORT={}", ports.grpc),
          fmt::format("DEBUG_PORT={}", ports.debug)};
}

}  // namespace floodgate::testing
