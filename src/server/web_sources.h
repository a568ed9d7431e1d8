#pragma once

// The demo page's files (web/), embedded at build time (cmake/embed_files.cmake).

#include <string_view>

namespace floodgate::server::web {

extern const std::string_view k_index_html;

}  // namespace floodgate::server::web
