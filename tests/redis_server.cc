// Real redis-servers, Redis Clusters and Sentinels for tests: started, waited for, stopped by PID.

#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace floodgate::testing {

namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A socket connected to 127.0.0.1:port, or to the unix socket when one is given; -1 if
// nothing listens there.
int ConnectTo(int port, const std::string& unix_socket) {
  const int fd = socket(unix_socket.empty() ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int connected = -1;
  if (unix_socket.empty()) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else if (unix_socket.size() < sizeof(sockaddr_un::sun_path)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, unix_socket.c_str(), unix_socket.size() + 1);
    connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (connected == 0) return fd;
  close(fd);
  return -1;
}

// One PING over a fresh socket; true on +PONG (or a NOAUTH error: up, but locked).
bool Pings(int port, const std::string& unix_socket) {
  const int fd = ConnectTo(port, unix_socket);
  if (fd < 0) return false;
  bool ok = false;
  const char ping[] = "*1\r\n$4\r\nPING\r\n";
  char reply[64] = {};
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (write(fd, ping, sizeof ping - 1) == sizeof ping - 1 && read(fd, reply, sizeof reply) > 0) {
    ok = std::strncmp(reply, "+PONG", 5) == 0 || std::strncmp(reply, "-NOAUTH", 7) == 0;
  }
  close(fd);
  return ok;
}

// A test's store options: its own, and unless it sets one, a connect_timeout that only
// guards a hang. The default (1 s) is less than a sanitized process on a loaded machine
// may need to connect and load the scripts: `floodgate bench` then exited with "no
// connection within 1000 ms" (measured beside two busy neighbours in the TSan tree).
std::string WithConnectGuard(const std::string& options) {
  if (options.find("connect_timeout=") != std::string::npos) return options;
  const std::string guard = fmt::format("connect_timeout={}s", kHangGuard.count());
  return options.empty() ? guard : options + "&" + guard;
}

bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return free;
}

}  // namespace

std::unique_ptr<RedisStore> OpenRedis(const std::string& url) {
  auto options = RedisStoreOptions::FromUrl(url);
  EXPECT_TRUE(options.ok()) << options.status();
  if (!options.ok()) return nullptr;
  auto store = RedisStore::Open(*options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

std::optional<std::chrono::steady_clock::duration> TimeUntilRedisAnswers(
    Store& store, const std::string& key, const Policy& policy,
    std::chrono::steady_clock::duration limit) {
  using Steady = std::chrono::steady_clock;
  const auto begin = Steady::now();
  while (Steady::now() - begin < limit) {
    auto d = store.Decide({key, policy, 1, std::nullopt});
    if (d.ok() && !d->degraded) return Steady::now() - begin;
  }
  return std::nullopt;
}

std::string InfoField(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with(name + ":")) return line.substr(name.size() + 1);
  }
  return "";
}

std::string RunShell(const std::string& command, int* status) {
  std::string out;
  int exit_status = -1;
  if (std::FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    exit_status = pclose(pipe);
  }
  if (status != nullptr) *status = exit_status;
  return out;
}

// Below the kernel's ephemeral range (Linux: 32768-60999), so that no test's outgoing
// connection is given the port between this pick and the bind of the process it is for (the
// kernel's bind to port 0 picks from that range, where every client socket of the tests
// running beside takes its ports too: a ratelimit process in CI lost its gRPC port so).
// Random in 10000-19999, away from FreeClusterNodePort's 20000-39999; the kernel's pick if
// none of 100 tries is free.
int FreeLoopbackPort() {
  thread_local std::mt19937 random{std::random_device{}()};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = std::uniform_int_distribution<int>(10000, 19999)(random);
    if (PortIsFree(port)) return port;
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

namespace {
// The lowest port the kernel gives a connection as its source port (Linux's default 32768).
int EphemeralLow() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;  // "low high"
  return low;
}
}  // namespace

int FreeClusterNodePort() {
  // The bus port is port + 10000, so both must be free. Both stay below the ephemeral
  // range: picked in 20000-29999, a bus port above 32767 could become some connection's
  // source port between the pick and the node's start (a node did not start so, once).
  static const int highest = std::max(20000, std::min(29999, EphemeralLow() - 10001));
  thread_local std::mt19937 random{std::random_device{}()};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = std::uniform_int_distribution<int>(20000, highest)(random);
    if (PortIsFree(port) && PortIsFree(port + 10000)) return port;
  }
  return 0;
}

namespace {
// The port to start on: `port`, or a fresh pick from `free` for each attempt when 0.
std::function<int()> PortOr(int port, int (*free)()) {
  if (port == 0) return free;
  return [port] { return port; };
}
}  // namespace

std::unique_ptr<RedisServer> RedisServer::Start(std::vector<std::string> extra_args, int port) {
  return StartWith(
      {.extra_args = std::move(extra_args), .pick_port = PortOr(port, &FreeLoopbackPort)});
}

std::unique_ptr<RedisServer> RedisServer::StartClusterNode(int port) {
  return StartWith(ClusterNodeOptions(port));
}

std::unique_ptr<RedisServer> RedisServer::TryStartClusterNode(int port) {
  StartOptions options = ClusterNodeOptions(port);
  options.attempts = 1;
  options.failure_fails_test = false;
  return StartWith(std::move(options));
}

RedisServer::StartOptions RedisServer::ClusterNodeOptions(int port) {
  // A node is taken for failed after kHangGuard of silence, never because a loaded machine
  // stalled it: with 1 s, a replica promoted itself in the middle of a test (its settles
  // answered by errors). Tests that want a failover ask for one (CLUSTER FAILOVER TAKEOVER).
  const std::string node_timeout = std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(kHangGuard).count());
  return {.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", node_timeout,
                         "--cluster-replica-validity-factor", "0",
                         // A failed primary takes down only its own slots, not the whole
                         // cluster: what a rate limiter in front of everything wants.
                         "--cluster-require-full-coverage", "no",
                         // A replica syncs at once: with the default 5 s diskless-sync delay
                         // a CLUSTER FAILOVER asked meanwhile timed out (its limit is 5 s too).
                         "--repl-diskless-sync-delay", "0"},
          .pick_port = PortOr(port, &FreeClusterNodePort)};
}

std::unique_ptr<RedisServer> RedisServer::StartOnUnixSocket(std::vector<std::string> extra_args) {
  return StartWith(
      {.extra_args = std::move(extra_args), .pick_port = [] { return 0; }, .on_unix_socket = true});
}

std::unique_ptr<RedisServer> RedisServer::StartSentinel(const std::string& config) {
  return StartWith({.pick_port = &FreeLoopbackPort, .sentinel_config = config});
}

std::unique_ptr<RedisServer> RedisServer::StartWith(StartOptions options) {
  std::unique_ptr<RedisServer> server(new RedisServer());  // its constructor is private
  server->extra_args_ = std::move(options.extra_args);
  std::string dir = (std::filesystem::temp_directory_path() / "floodgate-redis-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return nullptr;
  }
  server->dir_ = dir;
  if (!options.sentinel_config.empty()) {
    server->config_file_ = dir + "/sentinel.conf";
    std::ofstream(server->config_file_) << options.sentinel_config;
  }
  if (options.on_unix_socket) {
    server->unix_socket_ = dir + "/redis.sock";
    server->extra_args_.insert(server->extra_args_.end(),
                               {"--unixsocket", server->unix_socket_, "--unixsocketperm", "700"});
  }
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    server->port_ = options.pick_port();
    if (server->Launch()) return server;
  }
  if (options.failure_fails_test) {
    ADD_FAILURE() << "could not start redis-server (is the redis-server package installed?)";
  }
  return nullptr;
}

bool RedisServer::Launch() {
  std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_),
                                   "--bind",       "127.0.0.1", "--dir",
                                   dir_,           "--save",    "",
                                   "--appendonly", "no",        "--daemonize",
                                   "no",           "--logfile", dir_ + "/redis.log"};
  if (!config_file_.empty()) args.insert(args.begin() + 1, {config_file_, "--sentinel"});
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The server logs to its file; its stdin, stdout and stderr go nowhere, so that a test
  // process that dies without stopping it does not leave ctest waiting on their pipe.
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, "redis-server", &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) return false;
  pid_ = pid;
  if (WaitReady(kHangGuard)) return true;
  Kill();
  return false;
}

bool RedisServer::WaitReady(std::chrono::milliseconds limit) {
  // Polls until the server answers (bounded): readiness is the condition waited for.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Pings(port_, unix_socket_)) {
      // This server, not another test's that holds the port (ours then exits, unable to
      // bind it, and Launch tries another port). A server with a password says nothing.
      const std::string pid = InfoField(Cli({"INFO", "server"}), "process_id");
      if (pid.empty() || std::atoi(pid.c_str()) == pid_) return true;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      // It exited, and is reaped: no pid is left to Kill(), which would signal whatever
      // process was given that number next.
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

RedisServer::~RedisServer() {
  Kill();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

std::string RedisServer::url(const std::string& options) const {
  const std::string where = unix_socket_.empty() ? fmt::format("redis://127.0.0.1:{}", port_)
                                                 : "redis+unix://" + unix_socket_;
  return fmt::format("{}?{}", where, WithConnectGuard(options));
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string RedisServer::Log() const {
  std::ifstream file(dir_ + "/redis.log");
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

bool RedisServer::Restart() {
  Kill();
  return Launch();
}

std::string RedisServer::Cli(const std::vector<std::string>& args) const {
  // Bounded (a server that never answers would hold redis-cli, and the test, for good).
  std::string command =
      fmt::format("timeout {} redis-cli ", kHangGuard.count()) +
      (unix_socket_.empty() ? fmt::format("-h 127.0.0.1 -p {}", port_)
                            : "-s " + ShellQuote(unix_socket_));
  for (const auto& a : args) command += " " + ShellQuote(a);
  command += " 2>&1";
  return RunShell(command);
}

namespace {

void PrintReply(const redisReply& reply, std::string& out) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      out += std::to_string(reply.integer) + "\n";
      break;
    case REDIS_REPLY_NIL:
      out += "\n";
      break;
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < reply.elements; ++i) PrintReply(*reply.element[i], out);
      break;
    default:  // a string, a status, an error
      out.append(reply.str, reply.len);
      out += "\n";
  }
}

}  // namespace

std::string RedisServer::Command(const std::vector<std::string>& args) const {
  const timeval guard{static_cast<time_t>(kHangGuard.count()), 0};
  redisContext* context = unix_socket_.empty()
                              ? redisConnectWithTimeout("127.0.0.1", port_, guard)
                              : redisConnectUnixWithTimeout(unix_socket_.c_str(), guard);
  const std::unique_ptr<redisContext, decltype(&redisFree)> owned(context, &redisFree);
  if (context == nullptr || context->err != 0) {
    ADD_FAILURE() << "cannot connect to redis-server " << port_;
    return "";
  }
  redisSetTimeout(context, guard);  // a server that never answers fails the test, not hangs it
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (reply == nullptr) {
    ADD_FAILURE() << "redis-server " << port_ << ": " << context->errstr;
    return "";
  }
  const std::unique_ptr<redisReply, decltype(&freeReplyObject)> owned_reply(reply,
                                                                            &freeReplyObject);
  std::string out;
  PrintReply(*reply, out);
  return out;
}

PausedWrites::PausedWrites(std::vector<RedisServer*> servers) : servers_(std::move(servers)) {
  for (RedisServer* server : servers_) {
    EXPECT_EQ(server->Cli({"CLIENT", "PAUSE", "600000", "WRITE"}), "OK\n") << server->port();
  }
}

void PausedWrites::End() {
  for (RedisServer* server : servers_) {
    if (server->running()) server->Cli({"CLIENT", "UNPAUSE"});
  }
  servers_.clear();
}

// ---- RedisCluster ----------------------------------------------------------------------

std::unique_ptr<RedisCluster> RedisCluster::Start(int primaries) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::string create = "redis-cli --cluster create";
  for (int i = 0; i < primaries * 2; ++i) {
    auto node = RedisServer::StartClusterNode();
    if (node == nullptr) return nullptr;
    create += fmt::format(" 127.0.0.1:{}", node->port());
    nodes.push_back(std::move(node));
  }
  return Create(std::move(nodes), create + " --cluster-replicas 1 --cluster-yes");
}

std::unique_ptr<RedisCluster> RedisCluster::Create(std::vector<std::unique_ptr<RedisServer>> nodes,
                                                   const std::string& create_command) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  cluster->nodes_ = std::move(nodes);
  // Bounded: redis-cli waits for the nodes to agree with no limit of its own.
  const std::string out =
      RunShell(fmt::format("timeout {} {} 2>&1", kHangGuard.count(), create_command));
  if (out.find("[OK] All 16384 slots covered") == std::string::npos) {
    ADD_FAILURE() << "redis-cli --cluster create failed:\n" << out;
    return nullptr;
  }
  if (!cluster->WaitHealthy(kHangGuard)) {
    ADD_FAILURE() << "the cluster did not become healthy";
    return nullptr;
  }
  cluster->formed_owners_ = cluster->Owners(*cluster->nodes_.front());
  return cluster;
}

RedisCluster* RedisCluster::Shared() {
  // Static storage on purpose: the cluster outlives each test and is torn down (by PID)
  // when the test process exits.
  static std::unique_ptr<RedisCluster> shared;
  if (shared != nullptr && !shared->ReuseAsFormed()) shared.reset();
  if (shared == nullptr) shared = Start();
  return shared.get();
}

bool RedisCluster::ReuseAsFormed() {
  for (const auto& node : nodes_) {
    if (!node->running()) return false;
    if (node->Cli({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
    if (Owners(*node) != formed_owners_) return false;
  }
  for (RedisServer* primary : Primaries()) {
    if (primary->Cli({"FLUSHALL"}).find("OK") == std::string::npos) return false;
  }
  for (const auto& node : nodes_) node->Cli({"CONFIG", "RESETSTAT"});
  return true;
}

std::string RedisCluster::url(const std::string& options) const {
  std::string hosts;
  for (const auto& node : nodes_) {
    if (!hosts.empty()) hosts += ',';
    hosts += fmt::format("127.0.0.1:{}", node->port());
  }
  return fmt::format("redis-cluster://{}?{}", hosts, WithConnectGuard(options));
}

// CLUSTER NODES: "<id> <ip:port@bus> <flags> <primary> <ping> <pong> <epoch> <state>
// <slot ranges...>", one node per line.
std::vector<RedisCluster::NodeLine> RedisCluster::Nodes(const RedisServer& asked) {
  std::vector<NodeLine> lines;
  std::istringstream text(asked.Cli({"CLUSTER", "NODES"}));
  std::string line;
  while (std::getline(text, line)) {
    std::istringstream fields(line);
    NodeLine node;
    std::string address, flags, skip;
    if (!(fields >> node.id >> address >> flags)) continue;
    const std::size_t colon = address.find(':');
    const std::size_t at = address.find('@');
    if (colon == std::string::npos || at == std::string::npos) continue;
    node.port = std::atoi(address.substr(colon + 1, at - colon - 1).c_str());
    node.primary = flags.find("master") != std::string::npos;
    node.failed = flags.find("fail") != std::string::npos;
    for (int i = 0; i < 5 && fields >> skip; ++i) {
    }
    std::string range;
    while (fields >> range) {
      if (range.starts_with('[')) continue;  // a slot being migrated
      const std::size_t dash = range.find('-');
      const int first = std::atoi(range.substr(0, dash).c_str());
      const int last =
          dash == std::string::npos ? first : std::atoi(range.substr(dash + 1).c_str());
      node.slots.emplace_back(first, last);
    }
    lines.push_back(std::move(node));
  }
  return lines;
}

RedisServer* RedisCluster::PrimaryOf(int slot) {
  for (const auto& asked : nodes_) {
    if (!asked->running()) continue;
    for (const NodeLine& line : Nodes(*asked)) {
      if (!line.primary || line.failed) continue;
      for (const auto& [first, last] : line.slots) {
        if (slot < first || slot > last) continue;
        for (auto& node : nodes_) {
          if (node->port() == line.port) return node.get();
        }
      }
    }
    break;  // the first live node's view
  }
  return nullptr;
}

std::vector<int> RedisCluster::PrimaryPorts() {
  std::vector<int> ports;
  for (const auto& asked : nodes_) {
    if (!asked->running()) continue;
    for (const NodeLine& line : Nodes(*asked)) {
      if (line.primary && !line.failed && !line.slots.empty()) ports.push_back(line.port);
    }
    break;
  }
  return ports;
}

std::vector<RedisServer*> RedisCluster::Primaries() {
  std::vector<RedisServer*> primaries;
  for (int port : PrimaryPorts()) {
    for (auto& node : nodes_) {
      if (node->port() == port) primaries.push_back(node.get());
    }
  }
  return primaries;
}

RedisServer* RedisCluster::AnotherPrimary(const RedisServer& other) {
  for (RedisServer* primary : Primaries()) {
    if (primary != &other) return primary;
  }
  return nullptr;
}

RedisServer* RedisCluster::ReplicaOf(RedisServer& primary) {
  std::string id = primary.Cli({"CLUSTER", "MYID"});
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  for (auto& node : nodes_) {
    if (!node->running()) continue;
    std::istringstream lines(node->Cli({"CLUSTER", "NODES"}));
    for (std::string line; std::getline(lines, line);) {
      // "<id> <address> myself,slave <primary id> ...": this node replicates `primary`.
      if (line.find("myself,slave " + id) != std::string::npos) return node.get();
    }
  }
  return nullptr;
}

std::string RedisCluster::Owners(const RedisServer& asked) {
  std::vector<std::string> owners;
  for (const NodeLine& line : Nodes(asked)) {
    if (!line.primary || line.failed) continue;
    for (const auto& [first, last] : line.slots) {
      owners.push_back(fmt::format("{}-{}:{}", first, last, line.port));
    }
  }
  std::sort(owners.begin(), owners.end());
  std::string view;
  for (const auto& o : owners) view += o + " ";
  return view;
}

bool RedisCluster::WaitHealthy(std::chrono::milliseconds limit) {
  // Polls (bounded): the cluster agreeing is the condition waited for.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool healthy = true;
    std::string view;
    for (const auto& node : nodes_) {
      if (!node->running()) continue;
      if (node->Cli({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
        healthy = false;
        break;
      }
      // Every node names the same primaries for the same slots.
      const std::string this_view = Owners(*node);
      if (view.empty()) view = this_view;
      if (this_view != view) {
        healthy = false;
        break;
      }
    }
    if (healthy && !view.empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// ---- RedisSentinels ---------------------------------------------------------------------

namespace {

// The value after `name` in redis-cli's rendering of a flat field/value reply (SENTINEL
// MASTER): one per line, a field's value on the line after it.
std::string FieldAfter(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line == name && std::getline(lines, line)) return line;
  }
  return "";
}

// Polls `ready` every 20 ms until it holds or `limit` passes (bounded: the state waited
// for is the condition itself).
bool PollUntil(std::chrono::milliseconds limit, const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ready();
}

}  // namespace

std::unique_ptr<RedisSentinels> RedisSentinels::Start(int replicas) {
  std::unique_ptr<RedisSentinels> setup(new RedisSentinels());
  // A replica syncs at once (no diskless-sync delay), also after a failover.
  const std::vector<std::string> sync = {"--repl-diskless-sync-delay", "0"};
  auto primary = RedisServer::Start(sync);
  if (primary == nullptr) return nullptr;
  std::vector<std::string> replica_args = sync;
  replica_args.insert(replica_args.end(),
                      {"--replicaof", "127.0.0.1", std::to_string(primary->port())});
  const int primary_port = primary->port();
  setup->servers_.push_back(std::move(primary));
  for (int i = 0; i < replicas; ++i) {
    auto replica = RedisServer::Start(replica_args);
    if (replica == nullptr) return nullptr;
    setup->servers_.push_back(std::move(replica));
  }
  // Sentinels learn the replicas from the primary's INFO when they start: the replicas are
  // attached first.
  if (!PollUntil(kHangGuard, [&] {
        for (std::size_t i = 1; i < setup->servers_.size(); ++i) {
          if (InfoField(setup->servers_[i]->Cli({"INFO", "replication"}), "master_link_status") !=
              "up") {
            return false;
          }
        }
        return true;
      })) {
    ADD_FAILURE() << "the replicas did not sync with the primary";
    return nullptr;
  }
  // down-after is kHangGuard, as the cluster's node timeout: a primary stalled by a loaded
  // machine is not taken for down (500 ms could start a failover no test asked for). Tests
  // that want one ask a sentinel (SENTINEL FAILOVER).
  const std::string config = fmt::format(
      "sentinel monitor fg 127.0.0.1 {} 2\n"
      "sentinel down-after-milliseconds fg {}\n"
      "sentinel failover-timeout fg 2000\n"
      "sentinel parallel-syncs fg 1\n",
      primary_port, std::chrono::duration_cast<std::chrono::milliseconds>(kHangGuard).count());
  for (int i = 0; i < 3; ++i) {
    auto sentinel = RedisServer::StartSentinel(config);
    if (sentinel == nullptr) return nullptr;
    setup->sentinels_.push_back(std::move(sentinel));
  }
  // An automatic failover needs the sentinels to know each other (hello messages every 2 s)
  // and the replica.
  if (!PollUntil(kHangGuard, [&] {
        for (const auto& sentinel : setup->sentinels_) {
          const std::string master = sentinel->Cli({"SENTINEL", "MASTER", "fg"});
          if (FieldAfter(master, "num-other-sentinels") != "2" ||
              FieldAfter(master, "num-slaves") != std::to_string(replicas)) {
            return false;
          }
        }
        return true;
      })) {
    ADD_FAILURE() << "the sentinels did not find each other and the replicas";
    return nullptr;
  }
  return setup;
}

std::string RedisSentinels::url(const std::string& options) const {
  std::string hosts;
  for (const auto& sentinel : sentinels_) {
    if (!hosts.empty()) hosts += ',';
    hosts += fmt::format("127.0.0.1:{}", sentinel->port());
  }
  return fmt::format("redis-sentinel://{}/fg?{}", hosts, WithConnectGuard(options));
}

int RedisSentinels::PrimaryPort() {
  for (const auto& sentinel : sentinels_) {
    if (!sentinel->running()) continue;
    std::istringstream lines(sentinel->Cli({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fg"}));
    std::string host, port;
    if (std::getline(lines, host) && std::getline(lines, port)) return std::atoi(port.c_str());
    return 0;
  }
  return 0;
}

RedisServer* RedisSentinels::ServerOn(int port) {
  for (auto& server : servers_) {
    if (server->port() == port) return server.get();
  }
  return nullptr;
}

bool RedisSentinels::WaitPrimary(int port, std::chrono::milliseconds limit) {
  return PollUntil(limit, [&] {
    for (const auto& sentinel : sentinels_) {
      if (!sentinel->running()) continue;
      std::istringstream lines(sentinel->Cli({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fg"}));
      std::string host, named;
      if (!std::getline(lines, host) || !std::getline(lines, named) ||
          std::atoi(named.c_str()) != port) {
        return false;
      }
    }
    return true;
  });
}

bool RedisSentinels::WaitReplicated(std::chrono::milliseconds limit) {
  RedisServer* primary = ServerOn(PrimaryPort());
  if (primary == nullptr) return false;
  const long long offset =
      std::atoll(InfoField(primary->Cli({"INFO", "replication"}), "master_repl_offset").c_str());
  return PollUntil(limit, [&] {
    for (const auto& server : servers_) {
      if (server.get() == primary || !server->running()) continue;
      const std::string info = server->Cli({"INFO", "replication"});
      if (InfoField(info, "master_link_status") != "up" ||
          std::atoll(InfoField(info, "slave_repl_offset").c_str()) < offset) {
        return false;
      }
    }
    return true;
  });
}

}  // namespace floodgate::testing
