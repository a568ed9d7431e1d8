#pragma once

// The `ratelimit` command's logging: LOG_LEVEL and LOG_FORMAT as upstream's logrus writes them.
//
// docs/envoy.md, "Logs". Lines go to stderr. `json`: one object a line with upstream's field names
// ({"@message":..,"@timestamp":RFC 3339 with nanoseconds,"level":"warning"}); otherwise
// logrus' text lines (time="..." level=warning msg="...").

#include <spdlog/formatter.h>

#include <memory>

#include "server/rls/upstream_mode.h"

namespace floodgate::cli {

class LogrusFormatter final : public spdlog::formatter {
 public:
  explicit LogrusFormatter(server::rls::LogFormat format) : format_(format) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;

 private:
  server::rls::LogFormat format_;
};

// Replaces the default logger by one writing to stderr at `level` in `format`. Call before any
// thread logs.
void UseUpstreamLogging(server::rls::LogLevel level, server::rls::LogFormat format);

}  // namespace floodgate::cli
