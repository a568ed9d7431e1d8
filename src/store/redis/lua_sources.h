#pragma once

// The Lua sources of lua/, embedded at build time (cmake/embed_lua.cmake).
//
// Scripts are assembled by concatenation: common + algorithm(s) + a driver (single, batch or
// reservation; node_batch + batch for a cluster node's batch); upstream.lua goes alone.

#include <string>
#include <string_view>

namespace floodgate::redis::lua {

extern const std::string_view k_common;
extern const std::string_view k_gcra;
extern const std::string_view k_token_bucket;
extern const std::string_view k_sliding_log;
extern const std::string_view k_sliding_window;
extern const std::string_view k_fixed_window;
extern const std::string_view k_concurrency;
extern const std::string_view k_single;
extern const std::string_view k_batch;
extern const std::string_view k_node_batch;
extern const std::string_view k_reservation;
extern const std::string_view k_take;
extern const std::string_view k_upstream;
extern const std::string_view k_operate;

// One algorithm's script for its single decisions: common, the algorithm, single.lua.
inline std::string SingleScript(std::string_view algorithm) {
  return std::string(k_common).append(algorithm).append(k_single);
}

// A driver's script (batch.lua, reservation.lua): common, every algorithm, the driver.
inline std::string DriverScript(std::string_view driver) {
  return std::string(k_common)
      .append(k_gcra)
      .append(k_token_bucket)
      .append(k_sliding_log)
      .append(k_sliding_window)
      .append(k_fixed_window)
      .append(k_concurrency)
      .append(driver);
}

// lua/batch.lua on keys of several slots of one cluster node (lua/node_batch.lua). Redis
// reads script flags from a shebang on the first line; Redis < 7.0 refuses to load it.
inline std::string NodeBatchScript() {
  return "#!lua flags=allow-cross-slot-keys\n" +
         DriverScript(std::string(k_node_batch).append(k_batch));
}

}  // namespace floodgate::redis::lua
