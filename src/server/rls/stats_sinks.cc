// statsd, DogStatsD and the logging sink: upstream's stats written as its libraries write them.

#include "server/rls/stats_sinks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <re2/re2.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

namespace floodgate::server::rls {

namespace {

// gostats' net sink: its UDP buffer (one datagram), its dial and write timeouts.
constexpr std::size_t kUdpPayload = 1432;
constexpr int kDialTimeoutMs = 1500;
constexpr int kWriteTimeoutMs = 1000;
// A flush's text past this is dropped (gostats keeps at most about 4 MiB queued).
constexpr std::size_t kMaxBuffered = std::size_t{1} << 22;

// One connected socket to STATSD_HOST:STATSD_PORT, dialled again after a failure (at the next
// flush, as gostats' sink reconnects in its loop).
class Connection {
 public:
  Connection(std::string host, std::uint16_t port, StatsTransport transport)
      : host_(std::move(host)), port_(port), transport_(transport) {}
  ~Connection() { Close(); }

  // Sends `text` (whole lines): one write on TCP, datagrams of whole lines on UDP.
  void Send(std::string_view text) {
    if (text.empty()) return;
    if (fd_ < 0 && !Dial()) return;
    bool ok = true;
    if (transport_ == StatsTransport::kTcp) {
      ok = WriteAll(text);
    } else {
      while (ok && !text.empty()) {
        std::size_t size = text.size();
        if (size > kUdpPayload) {
          const std::size_t cut = text.rfind('\n', kUdpPayload - 1);
          size = cut == std::string_view::npos ? text.find('\n') + 1 : cut + 1;
          if (size == 0) size = text.size();  // one line without its newline
        }
        ok = ::send(fd_, text.data(), size, MSG_NOSIGNAL) >= 0 || errno == ECONNREFUSED;
        text.remove_prefix(std::min(size, text.size()));
      }
    }
    if (!ok) {
      Warn(fmt::format("write: {}", std::strerror(errno)));
      Close();
    }
  }

 private:
  bool Dial() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = transport_ == StatsTransport::kTcp ? SOCK_STREAM : SOCK_DGRAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(port_);
    if (const int rc = ::getaddrinfo(host_.c_str(), port.c_str(), &hints, &found); rc != 0) {
      Warn(fmt::format("lookup of {}: {}", host_, ::gai_strerror(rc)));
      return false;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
      const int fd = ::socket(at->ai_family, at->ai_socktype | SOCK_CLOEXEC, at->ai_protocol);
      if (fd < 0) continue;
      if (ConnectWithin(fd, at)) {
        fd_ = fd;
        failing_ = false;
        return true;
      }
      ::close(fd);
    }
    Warn(fmt::format("connection to {}:{}: {}", host_, port_, std::strerror(errno)));
    return false;
  }

  static bool ConnectWithin(int fd, const addrinfo* at) {
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (::connect(fd, at->ai_addr, at->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) return false;
      pollfd wait{.fd = fd, .events = POLLOUT, .revents = 0};
      if (::poll(&wait, 1, kDialTimeoutMs) != 1) {
        errno = ETIMEDOUT;
        return false;
      }
      int error = 0;
      socklen_t size = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error != 0) {
        errno = error;
        return false;
      }
    }
    ::fcntl(fd, F_SETFL, flags);
    const timeval timeout{.tv_sec = kWriteTimeoutMs / 1000, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    return true;
  }

  bool WriteAll(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Logged once per run of failures: a statsd that is away must not flood the log.
  void Warn(const std::string& what) {
    if (!failing_) spdlog::warn("stats sink: {} (stats are dropped until it answers)", what);
    failing_ = true;
  }

  const std::string host_;
  const std::uint16_t port_;
  const StatsTransport transport_;
  int fd_ = -1;
  bool failing_ = false;
};

// Lines appended by a flush, sent at its end.
class LineSink : public StatsSink {
 public:
  explicit LineSink(const StatsSettings& settings)
      : connection_(settings.host, settings.port, settings.transport) {}
  void Flush() override {
    connection_.Send(buffer_);
    buffer_.clear();
  }

 protected:
  void Append(std::string line) {
    if (buffer_.size() + line.size() + 1 > kMaxBuffered) return;
    buffer_ += line;
    buffer_ += '\n';
  }

 private:
  Connection connection_;
  std::string buffer_;
};

// gostats' netSink: `name:value|c`, `|g`, and `|ms` (an integer when the value is one, else
// six decimals).
class StatsdSink final : public LineSink {
 public:
  using LineSink::LineSink;
  void Counter(std::string_view name, std::uint64_t delta) override {
    Append(fmt::format("{}:{}|c", name, delta));
  }
  void Gauge(std::string_view name, std::uint64_t value) override {
    Append(fmt::format("{}:{}|g", name, value));
  }
  void Timer(std::string_view name, double ms) override {
    Append(ms >= 0 && std::trunc(ms) == ms && ms < 1.8e19
               ? fmt::format("{}:{}|ms", name, static_cast<std::uint64_t>(ms))
               : fmt::format("{}:{:.6f}|ms", name, ms));
  }
};

// godogstats: the gostats name's serialized tags split off (separateTags), then the first
// mogrifier that matches renames it and adds its tags.
class DogStatsdNamer {
 public:
  explicit DogStatsdNamer(const StatsSettings& settings) : global_tags_(settings.dogstatsd_tags) {
    for (const Mogrifier& mogrifier : settings.mogrifiers) {
      compiled_.push_back({std::make_unique<re2::RE2>(mogrifier.pattern), &mogrifier});
    }
  }

  std::string Line(std::string_view serialized, std::string_view value_and_type) const {
    std::string name(serialized);
    std::vector<std::string> tags;
    if (const std::size_t at = name.find(".__"); at != std::string::npos) {
      std::string_view rest = std::string_view(name).substr(at + 3);
      for (;;) {
        const std::size_t next = rest.find(".__");
        const std::string_view pair = rest.substr(0, next);
        if (const std::size_t eq = pair.find('='); eq != std::string_view::npos) {
          tags.push_back(fmt::format("{}:{}", pair.substr(0, eq), pair.substr(eq + 1)));
        }
        if (next == std::string_view::npos) break;
        rest.remove_prefix(next + 3);
      }
      name.resize(at);
    }
    Mogrify(name, tags);
    std::string line = fmt::format("{}:{}", name, value_and_type);
    bool first = true;
    for (const std::vector<std::string>* list : {&global_tags_, &std::as_const(tags)}) {
      for (const std::string& tag : *list) {
        line += first ? "|#" : ",";
        first = false;
        for (char c : tag) {
          if (c != '\n') line += c;
        }
      }
    }
    return line;
  }

 private:
  struct Compiled {
    std::unique_ptr<re2::RE2> regex;
    const Mogrifier* mogrifier;
  };

  // mogrifier_map.go's makePatternHandler: `$N` is the N-th submatch ($0 the whole), kept as
  // it is past the last.
  static std::string Expand(std::string_view pattern, const std::vector<std::string>& matches) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      std::size_t end = i + 1;
      while (pattern[i] == '$' && end < pattern.size() && pattern[end] >= '0' &&
             pattern[end] <= '9') {
        ++end;
      }
      if (end > i + 1) {
        const std::string_view digits = pattern.substr(i + 1, end - i - 1);
        std::size_t n = 0;
        bool fits = digits.size() < 10;
        for (char d : digits) n = n * 10 + static_cast<std::size_t>(d - '0');
        out += fits && n < matches.size() ? matches[n] : std::string(pattern.substr(i, end - i));
        i = end - 1;
      } else {
        out += pattern[i];
      }
    }
    return out;
  }

  void Mogrify(std::string& name, std::vector<std::string>& tags) const {
    for (const Compiled& entry : compiled_) {
      const int groups = entry.regex->NumberOfCapturingGroups();
      std::vector<re2::StringPiece> pieces(static_cast<std::size_t>(groups) + 1);
      if (!entry.regex->Match(name, 0, name.size(), re2::RE2::UNANCHORED, pieces.data(),
                              groups + 1)) {
        continue;
      }
      std::vector<std::string> matches;
      for (const re2::StringPiece& piece : pieces) matches.emplace_back(piece.data(), piece.size());
      for (const auto& [key, value] : entry.mogrifier->tags) {
        tags.push_back(fmt::format("{}:{}", key, Expand(value, matches)));
      }
      name = Expand(entry.mogrifier->name, matches);
      return;
    }
  }

  std::vector<std::string> global_tags_;
  std::vector<Compiled> compiled_;
};

StatsSettings OverUdp(StatsSettings settings) {
  settings.transport = StatsTransport::kUdp;
  return settings;
}

// datadog-go's client as godogstats calls it: Count (an integer), Gauge (Go's shortest float),
// Timing (milliseconds, six decimals, from a whole number of them).
class DogStatsdSink final : public LineSink {
 public:
  // datadog-go dials "host:port" over UDP whatever STATSD_PROTOCOL says.
  explicit DogStatsdSink(const StatsSettings& settings)
      : LineSink(OverUdp(settings)), namer_(settings) {}
  void Counter(std::string_view name, std::uint64_t delta) override {
    Append(namer_.Line(name, fmt::format("{}|c", delta)));
  }
  void Gauge(std::string_view name, std::uint64_t value) override {
    Append(namer_.Line(name, fmt::format("{}|g", value)));
  }
  void Timer(std::string_view name, double ms) override {
    Append(namer_.Line(name, fmt::format("{:.6f}|ms", std::trunc(ms))));
  }

 private:
  DogStatsdNamer namer_;
};

// A JSON string as Go's encoding/json writes it (HTML characters escaped too).
std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || c == '<' || c == '>' || c == '&') {
      out += fmt::format("\\u{:04x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// gostats' loggingSink: one JSON line per stat, and one at each flush's end.
class LoggingSink final : public StatsSink {
 public:
  LoggingSink(std::FILE* out, std::function<double()> now) : out_(out), now_(std::move(now)) {}
  void Counter(std::string_view name, std::uint64_t delta) override {
    Log(name, "counter", static_cast<double>(delta));
  }
  void Gauge(std::string_view name, std::uint64_t value) override {
    Log(name, "gauge", static_cast<double>(value));
  }
  void Timer(std::string_view name, double ms) override { Log(name, "timer", ms); }
  void Flush() override {
    Log("", "all stats", 0);
    std::fflush(out_);
  }

 private:
  void Log(std::string_view name, std::string_view type, double value) {
    // encoding/json sorts the map's keys: name, type, value.
    std::string fields;
    if (!name.empty()) fields = fmt::format("\"name\":{},", JsonString(name));
    const std::string line = fmt::format(
        "{{\"level\":\"debug\",\"ts\":{:.6f},\"logger\":\"gostats.loggingsink\","
        "\"msg\":\"flushing {}\",\"json\":{{{}\"type\":\"{}\",\"value\":\"{:.6f}\"}}}}\n",
        now_(), type, fields, type, value);
    std::fwrite(line.data(), 1, line.size(), out_);
  }

  std::FILE* out_;
  std::function<double()> now_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StatsSink>> MakeNetworkSink(const StatsSettings& settings) {
  for (const Mogrifier& mogrifier : settings.mogrifiers) {
    const re2::RE2 regex(mogrifier.pattern, re2::RE2::Quiet);
    if (!regex.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("failed to compile pattern {}: {}", mogrifier.pattern, regex.error()));
    }
  }
  switch (settings.sink) {
    case StatsSinkKind::kStatsd:
      return std::make_unique<StatsdSink>(settings);
    case StatsSinkKind::kDogStatsd:
      return std::make_unique<DogStatsdSink>(settings);
    case StatsSinkKind::kNone:
      return nullptr;
    default:
      return absl::InternalError("not a network sink");
  }
}

std::unique_ptr<StatsSink> MakeLoggingSink(std::FILE* out, std::function<double()> now_seconds) {
  return std::make_unique<LoggingSink>(out, std::move(now_seconds));
}

std::string DogStatsdLine(std::string_view name, std::string_view value_and_type,
                          const StatsSettings& settings) {
  return DogStatsdNamer(settings).Line(name, value_and_type);
}

}  // namespace floodgate::server::rls
