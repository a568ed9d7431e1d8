// Log lines in logrus' formats, text or JSON with upstream's field names, on stderr.

#include "cli/upstream_log.h"

#include <absl/strings/str_replace.h>
#include <absl/time/time.h>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <string_view>

namespace floodgate::cli {

namespace {

using server::rls::LogFormat;
using server::rls::LogLevel;

// logrus' names of its levels (its "warning", not "warn").
std::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return "fatal";
    case spdlog::level::err:
      return "error";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::info:
      return "info";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::trace:
      return "trace";
    default:
      return "info";
  }
}

// A JSON string's contents as Go's encoding/json writes them (HTML characters escaped too).
void JsonEscape(std::string_view text, spdlog::memory_buf_t& out) {
  auto append = [&](std::string_view s) { out.append(s.data(), s.data() + s.size()); };
  for (const char c : text) {
    switch (c) {
      case '"':
        append("\\\"");
        break;
      case '\\':
        append("\\\\");
        break;
      case '\n':
        append("\\n");
        break;
      case '\r':
        append("\\r");
        break;
      case '\t':
        append("\\t");
        break;
      case '<':
        append("\\u003c");
        break;
      case '>':
        append("\\u003e");
        break;
      case '&':
        append("\\u0026");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
}

}  // namespace

void LogrusFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const absl::Time when = absl::FromChrono(msg.time);
  const std::string_view text(msg.payload.data(), msg.payload.size());
  auto out = std::back_inserter(dest);
  if (format_ == LogFormat::kJson) {
    // Go's time.RFC3339Nano: trailing zeros of the fraction dropped.
    const std::string stamp =
        absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*S%Ez", when, absl::UTCTimeZone());
    fmt::format_to(out, "{{\"@message\":\"");
    JsonEscape(text, dest);
    fmt::format_to(out, "\",\"@timestamp\":\"{}\",\"level\":\"{}\"}}\n",
                   absl::StrReplaceAll(stamp, {{"+00:00", "Z"}}), LevelName(msg.level));
    return;
  }
  const std::string stamp = absl::FormatTime("%Y-%m-%d%ET%H:%M:%S%Ez", when, absl::UTCTimeZone());
  fmt::format_to(out, "time=\"{}\" level={} msg=\"", absl::StrReplaceAll(stamp, {{"+00:00", "Z"}}),
                 LevelName(msg.level));
  for (const char c : text) {
    if (c == '"' || c == '\\') dest.push_back('\\');
    if (c == '\n') {
      fmt::format_to(out, "\\n");
      continue;
    }
    dest.push_back(c);
  }
  fmt::format_to(out, "\"\n");
}

std::unique_ptr<spdlog::formatter> LogrusFormatter::clone() const {
  return std::make_unique<LogrusFormatter>(format_);
}

void UseUpstreamLogging(LogLevel level, LogFormat format) {
  auto logger = std::make_shared<spdlog::logger>("ratelimit",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<LogrusFormatter>(format));
  switch (level) {
    case LogLevel::kFatal:
      logger->set_level(spdlog::level::critical);
      break;
    case LogLevel::kError:
      logger->set_level(spdlog::level::err);
      break;
    case LogLevel::kWarn:
      logger->set_level(spdlog::level::warn);
      break;
    case LogLevel::kInfo:
      logger->set_level(spdlog::level::info);
      break;
    case LogLevel::kDebug:
      logger->set_level(spdlog::level::debug);
      break;
    case LogLevel::kTrace:
      logger->set_level(spdlog::level::trace);
      break;
  }
  // Every line as it is written: the process may be killed, and a log reader (a test) waits.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace floodgate::cli
