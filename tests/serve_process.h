#pragma once

// `floodgate serve` as a process for end-to-end tests (FLOODGATE_BINARY).
//
// Spawned with its own log file, polled (bounded) until it listens, stopped by its PID.

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hang_guard.h"

extern char** environ;

namespace floodgate::testing {

namespace serve_process_detail {
namespace fs = std::filesystem;
namespace asio = boost::asio;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How the binary is started: `floodgate serve ARGS`, or as envoyproxy/ratelimit's binary
// (argv[0] "ratelimit", or `floodgate ratelimit` under prlimit: upstream's mode; ARGS
// follow, and are ignored by it).
enum class StartAs { kServe, kRatelimit };

// How the process is started, beyond its arguments and environment.
struct SpawnOptions {
  StartAs start_as = StartAs::kServe;
  // Its file descriptor limit, soft and hard (util-linux's prlimit sets it, then runs
  // floodgate under the same PID); none: this process's own.
  std::optional<int> max_open_files;
  // With max_open_files: a hard limit above that soft one.
  std::optional<int> hard_open_files;
};

// `floodgate serve ARGS`, its stdout and stderr in a log file; SIGTERM at the end.
class ServeProcess {
 public:
  // `env`: "NAME=value" entries added to (or replacing) this process's environment.
  explicit ServeProcess(std::vector<std::string> args, std::vector<std::string> env = {},
                        const SpawnOptions& options = {}) {
    std::string dir = (fs::temp_directory_path() / "floodgate-serve-XXXXXX").string();
    if (mkdtemp(dir.data()) != nullptr) dir_ = dir;
    log_ = dir_ / "serve.log";
    const char* program = FLOODGATE_BINARY;
    if (options.max_open_files) {
      // prlimit runs the binary by its path: upstream's mode as `floodgate ratelimit`.
      program = "/usr/bin/prlimit";
      args.insert(args.begin(),
                  {program,
                   fmt::format("--nofile={}:{}", *options.max_open_files,
                               options.hard_open_files.value_or(*options.max_open_files)),
                   FLOODGATE_BINARY, options.start_as == StartAs::kServe ? "serve" : "ratelimit"});
    } else if (options.start_as == StartAs::kServe) {
      args.insert(args.begin(), {FLOODGATE_BINARY, "serve"});
    } else {
      args.insert(args.begin(), "ratelimit");
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& mine) {
        return entry.substr(0, entry.find('=') + 1) == mine.substr(0, mine.find('=') + 1);
      });
      if (!replaced) environment.push_back(entry);
    }
    environment.insert(environment.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, program, &files, nullptr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&files);
    started_ = Steady::now();
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Polls (bounded) until `port` accepts connections; false if the process exited first.
  bool WaitListening(int port, milliseconds limit) {
    const auto deadline = Steady::now() + limit;
    while (Steady::now() < deadline && pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      asio::io_context io;
      asio::ip::tcp::socket socket(io);
      boost::system::error_code ec;
      socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
      if (!ec) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  int CountLogLines(const std::string& containing) const {
    std::istringstream lines(Log());
    int n = 0;
    for (std::string line; std::getline(lines, line);)
      n += line.find(containing) != std::string::npos;
    return n;
  }
  // Polls the log (bounded) until `count` lines contain `text`.
  bool WaitLogLines(const std::string& text, int count, milliseconds limit) const {
    const auto deadline = Steady::now() + limit;
    while (CountLogLines(text) < count) {
      if (Steady::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return true;
  }
  Steady::time_point started() const { return started_; }
  // SIGTERM, then waits (bounded) for the exit: its exit status, or -1 (still running:
  // killed) .
  int Stop(milliseconds limit) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    const auto deadline = Steady::now() + limit;
    while (Steady::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }
  // Waits (bounded) for the process to exit on its own: its exit status, or -1 (still
  // running, or killed by a signal).
  int WaitExit(milliseconds limit) {
    const auto deadline = Steady::now() + limit;
    while (pid_ > 0 && Steady::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return -1;
  }
  // Sends `signal` (the process keeps running until it handles it).
  void Signal(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }
  const fs::path& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

 private:
  fs::path dir_;
  fs::path log_;
  pid_t pid_ = -1;
  Steady::time_point started_;
};

namespace beast = boost::beast;

struct Answer {
  int status = 0;
  std::string body;
  Steady::duration took{};
};

// One HTTP/1.1 request to 127.0.0.1:`port` (bounded by kHangGuard), with `headers` besides
// Host and a JSON body's; status 0 when it failed.
inline Answer Http(int port, beast::http::verb verb, const std::string& target,
                   const std::string& body = "",
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  const auto begin = Steady::now();
  asio::io_context io;
  beast::tcp_stream stream(io);
  boost::system::error_code ec;
  stream.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  if (ec) return {};
  stream.expires_after(kHangGuard);
  beast::http::request<beast::http::string_body> request(verb, target, 11);
  request.set(beast::http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) request.set(name, value);
  if (!body.empty()) {
    request.set(beast::http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
  }
  // Asynchronous, so that the stream's timeout applies (Beast times out only asynchronous
  // operations: a server that never answers held a synchronous read for good).
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  beast::http::async_write(stream, request, [&](beast::error_code write_error, std::size_t) {
    ec = write_error;
    if (!ec) {
      beast::http::async_read(stream, buffer, response,
                              [&](beast::error_code read_error, std::size_t) { ec = read_error; });
    }
  });
  io.run();
  if (ec) return {};
  return {static_cast<int>(response.result_int()), response.body(), Steady::now() - begin};
}

}  // namespace serve_process_detail

using serve_process_detail::Answer;
using serve_process_detail::Http;
using serve_process_detail::ServeProcess;
using serve_process_detail::SpawnOptions;
using serve_process_detail::StartAs;

}  // namespace floodgate::testing
