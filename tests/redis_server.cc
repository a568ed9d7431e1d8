#include "redis_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

extern char** environ;

namespace floodgate::testing {

namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// One PING over a fresh socket; true on +PONG (or a NOAUTH error: up, but locked).
bool Pings(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char ping[] = "*1\r\n$4\r\nPING\r\n";
    char reply[64] = {};
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write(fd, ping, sizeof ping - 1) == sizeof ping - 1 && read(fd, reply, sizeof reply) > 0) {
      ok = std::strncmp(reply, "+PONG", 5) == 0 || std::strncmp(reply, "-NOAUTH", 7) == 0;
    }
  }
  close(fd);
  return ok;
}

}  // namespace

int FreeLoopbackPort() {
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

std::unique_ptr<RedisServer> RedisServer::Start(std::vector<std::string> extra_args) {
  std::unique_ptr<RedisServer> server(new RedisServer());
  server->extra_args_ = std::move(extra_args);
  std::string dir = (std::filesystem::temp_directory_path() / "floodgate-redis-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return nullptr;
  }
  server->dir_ = dir;
  // A port can be taken between probing and binding; try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    server->port_ = FreeLoopbackPort();
    if (server->Launch()) return server;
  }
  ADD_FAILURE() << "could not start redis-server (is the redis-server package installed?)";
  return nullptr;
}

bool RedisServer::Launch() {
  std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_),
                                   "--bind",       "127.0.0.1", "--dir",
                                   dir_,           "--save",    "",
                                   "--appendonly", "no",        "--daemonize",
                                   "no",           "--logfile", dir_ + "/redis.log"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) return false;
  pid_ = pid;
  if (WaitReady(std::chrono::seconds(10))) return true;
  Kill();
  return false;
}

bool RedisServer::WaitReady(std::chrono::milliseconds limit) const {
  // Polls until the server answers (bounded): readiness is the condition waited for.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Pings(port_)) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return false;  // it exited
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

RedisServer::~RedisServer() {
  Kill();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

std::string RedisServer::url(const std::string& options) const {
  return fmt::format("redis://127.0.0.1:{}{}{}", port_, options.empty() ? "" : "?", options);
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool RedisServer::Restart() {
  Kill();
  return Launch();
}

std::string RedisServer::Cli(const std::vector<std::string>& args) const {
  std::string command = fmt::format("redis-cli -h 127.0.0.1 -p {}", port_);
  for (const auto& a : args) command += " " + ShellQuote(a);
  command += " 2>&1";
  std::string out;
  if (std::FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    pclose(pipe);
  }
  return out;
}

}  // namespace floodgate::testing
