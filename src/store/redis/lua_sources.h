#pragma once

// The Lua sources of lua/, embedded at build time (cmake/embed_lua.cmake). Scripts are
// assembled by concatenation: common + algorithm(s) + a driver (single, batch or
// reservation).

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
extern const std::string_view k_reservation;

}  // namespace floodgate::redis::lua
