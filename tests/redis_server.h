#pragma once

// Real redis-servers, Redis Clusters and Sentinels for tests, on free loopback ports (or a socket).
//
// Debian's package, started in its own temp dir, stopped by its PID. No mocks stand in for Redis.

#include <floodgate/redis_store.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hang_guard.h"

namespace floodgate::testing {

class RedisServer {
 public:
  // Starts a server with `extra_args` (e.g. {"--requirepass", "secret"}) on `port`, or
  // on a free one when 0; fails the calling test (and returns nullptr) when it cannot.
  static std::unique_ptr<RedisServer> Start(std::vector<std::string> extra_args = {}, int port = 0);
  // A cluster node on `port`, or on a port where it and port + 10000 (the cluster bus)
  // are both free when 0.
  static std::unique_ptr<RedisServer> StartClusterNode(int port = 0);
  // A cluster node on `port`, tried once; nullptr, without failing the test, when the port
  // (or its bus port) was taken since it was picked: the caller picks again.
  static std::unique_ptr<RedisServer> TryStartClusterNode(int port);
  // A server on a unix socket only (`--port 0`: no TCP at all), <its temp dir>/redis.sock.
  static std::unique_ptr<RedisServer> StartOnUnixSocket(std::vector<std::string> extra_args = {});
  // `redis-server <dir>/sentinel.conf --sentinel` on a free port, the file holding `config`
  // (a sentinel rewrites its config file, so it gets one of its own).
  static std::unique_ptr<RedisServer> StartSentinel(const std::string& config);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  const std::string& unix_socket() const { return unix_socket_; }  // empty: TCP
  // redis://127.0.0.1:PORT or redis+unix:///PATH, then ?options, with connect_timeout set
  // to kHangGuard unless the options set it.
  std::string url(const std::string& options = "") const;

  // SIGKILL, like a crash; Restart() brings it back on the same port.
  void Kill();
  // SIGSTOP: the process stops, its connections stay open (a stalled host); SIGCONT.
  void Pause();
  void Resume();
  bool Restart();
  bool running() const { return pid_ > 0; }

  // The server's log (redis.log in its temp dir), for a failing test's message.
  std::string Log() const;
  // redis-cli against this server; returns its stdout.
  std::string Cli(const std::vector<std::string>& args) const;
  // One command on a connection of its own (hiredis), the reply as redis-cli prints it to a
  // pipe: an integer, a string or an error on a line, nil as an empty line, an array's
  // elements one after another. For the tests that send hundreds of commands: a redis-cli
  // is a fork of the test process, 0.2 s each under TSan.
  std::string Command(const std::vector<std::string>& args) const;

 private:
  RedisServer() = default;
  // What StartWith starts, and how hard it tries.
  struct StartOptions {
    std::vector<std::string> extra_args;
    std::function<int()> pick_port;  // the port of each attempt (0: no TCP)
    bool on_unix_socket = false;
    std::string sentinel_config;  // not empty: a sentinel with this config file
    // A picked port can be taken before the server binds it, so a pick is tried again;
    // a caller that picks its own ports (TryStartClusterNode) tries once, and is answered
    // nullptr without a test failure.
    int attempts = 5;
    bool failure_fails_test = true;
  };
  static std::unique_ptr<RedisServer> StartWith(StartOptions options);
  static StartOptions ClusterNodeOptions(int port);
  bool Launch();
  bool WaitReady(std::chrono::milliseconds limit);

  std::vector<std::string> extra_args_;
  std::string config_file_;  // a sentinel's, passed first
  std::string dir_;
  int port_ = 0;
  std::string unix_socket_;
  pid_t pid_ = -1;
};

// Redis's script calls held, not refused: `CLIENT PAUSE <10 min> WRITE` on every server
// given, until End() or destruction (CLIENT UNPAUSE). A test then decides by events how
// long Redis stays silent, instead of by a pause's duration that a loaded machine may
// outlast. Reads, PING, SCRIPT LOAD (a reconnect's handshake) and CLIENT UNPAUSE still
// pass; `CLIENT PAUSE ... ALL` would hold the UNPAUSE too, until the pause ran out.
class PausedWrites {
 public:
  explicit PausedWrites(std::vector<RedisServer*> servers);
  ~PausedWrites() { End(); }
  PausedWrites(const PausedWrites&) = delete;
  PausedWrites& operator=(const PausedWrites&) = delete;
  void End();

 private:
  std::vector<RedisServer*> servers_;
};

// A free TCP port on 127.0.0.1, below the ephemeral range (bound and released; the caller
// binds it next).
int FreeLoopbackPort();
// A free port whose cluster bus port (port + 10000) is free too, for a cluster node; both
// below the ephemeral range, so that no connection's source port takes one meanwhile.
int FreeClusterNodePort();

// A Redis store for `url` (redis://, rediss:// or redis-cluster://); records a test
// failure and returns nullptr when the URL is bad or the store cannot start.
std::unique_ptr<RedisStore> OpenRedis(const std::string& url);

// Decides on `key` until an answer comes from Redis again (not degraded), for at most
// `limit`: how long that took, or nullopt when Redis never answered within `limit`.
std::optional<std::chrono::steady_clock::duration> TimeUntilRedisAnswers(
    Store& store, const std::string& key, const Policy& policy,
    std::chrono::steady_clock::duration limit);

// One field ("name:value") of `text` (INFO's output), "" when absent.
std::string InfoField(const std::string& text, const std::string& name);

// Runs `command` through the shell; returns its stdout, and its exit status in `status`.
std::string RunShell(const std::string& command, int* status = nullptr);

// A Redis Cluster of real redis-server processes on loopback: `primaries` primaries with
// one replica each, joined by `redis-cli --cluster create`; a node is taken for failed only
// after kHangGuard of silence (a failover is asked for by the test). Torn down by PID.
class RedisCluster {
 public:
  static std::unique_ptr<RedisCluster> Start(int primaries = 3);
  // The cluster of three primaries this test process shares between its tests (gtest runs
  // them one after another), emptied for each (FLUSHALL, CONFIG RESETSTAT): forming a
  // cluster costs over 2 s, since Redis keeps a new primary out of `ok` for 2 s. When the
  // last test left it otherwise than it was formed (a node killed, a replica promoted,
  // a slot moved), a new one replaces it. nullptr (with a test failure) when none forms.
  static RedisCluster* Shared();
  // Joins nodes already started (with cluster-enabled) by running `create_command`
  // (a `redis-cli ... --cluster create ...`), then waits until the cluster is healthy.
  static std::unique_ptr<RedisCluster> Create(std::vector<std::unique_ptr<RedisServer>> nodes,
                                              const std::string& create_command);

  // redis-cluster://127.0.0.1:P1,127.0.0.1:P2,...?options (connect_timeout as url() above)
  std::string url(const std::string& options = "") const;
  std::vector<std::unique_ptr<RedisServer>>& nodes() { return nodes_; }
  // The node serving as primary for `slot` now (as that node's CLUSTER NODES says).
  RedisServer* PrimaryOf(int slot);
  // Ports of the nodes that are primaries and own slots now.
  std::vector<int> PrimaryPorts();
  std::vector<RedisServer*> Primaries();
  // A primary owning slots, other than `other`.
  RedisServer* AnotherPrimary(const RedisServer& other);
  // A live node replicating `primary` (as its own CLUSTER NODES says), or nullptr.
  RedisServer* ReplicaOf(RedisServer& primary);
  // Every live node reports cluster_state:ok and agrees on who serves every slot;
  // polled until `limit`.
  bool WaitHealthy(std::chrono::milliseconds limit);

 private:
  struct NodeLine {
    std::string id;
    int port = 0;
    bool primary = false;
    bool failed = false;
    std::vector<std::pair<int, int>> slots;
  };
  std::vector<NodeLine> Nodes(const RedisServer& asked);
  // Which primary serves which slots, as `asked` sees it: "first-last:port ..." sorted.
  std::string Owners(const RedisServer& asked);
  // Every node up, in state ok and naming the owners it was formed with; then emptied.
  bool ReuseAsFormed();

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::string formed_owners_;
};

// Redis Sentinel on loopback: a primary, `replicas` replicas and three `redis-server --sentinel`
// monitoring them as "fg" with quorum 2 and a down-after of kHangGuard (a failover is asked
// for by the test: SENTINEL FAILOVER). Torn down by PID.
class RedisSentinels {
 public:
  static std::unique_ptr<RedisSentinels> Start(int replicas = 1);

  // redis-sentinel://127.0.0.1:S1,...,127.0.0.1:S3/fg?options (connect_timeout as url() above)
  std::string url(const std::string& options = "") const;
  std::vector<std::unique_ptr<RedisServer>>& servers() { return servers_; }
  std::vector<std::unique_ptr<RedisServer>>& sentinels() { return sentinels_; }
  // The port the first live sentinel names as fg's primary (0: none).
  int PrimaryPort();
  // The server on `port`.
  RedisServer* ServerOn(int port);
  // Polls until every live sentinel names `port` as the primary (bounded by `limit`).
  bool WaitPrimary(int port, std::chrono::milliseconds limit);
  // Polls until the replicas' offsets reach the primary's (everything written is there).
  bool WaitReplicated(std::chrono::milliseconds limit);

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;  // primary first, then the replicas
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace floodgate::testing
