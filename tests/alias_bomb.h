#pragma once

// An envoyproxy/ratelimit config of a few KB that names width^depth descriptors by aliases.
//
// Each level is a list of `width` descriptors sharing one list of children by an alias, the
// anchor set at its first use: width 10, depth 7 is 3 KB of text and 10^7 descriptors to
// whoever walks it (docs/security.md, "Configuration files").

#include <string>

namespace floodgate::testing {

inline std::string AliasBomb(int width, int depth, const std::string& domain = "bomb") {
  std::string level;  // the innermost list first, each wrapped by the next
  for (int d = 0; d < depth; ++d) {
    std::string list = "&L" + std::to_string(d) + " [";
    for (int i = 0; i < width; ++i) {
      list += i == 0 ? "" : ", ";
      list += "{key: k" + std::to_string(d) + ", value: v" + std::to_string(i) + ", ";
      if (d == 0) {
        list += "rate_limit: {unit: second, requests_per_unit: 1}}";
      } else {
        list += "descriptors: " + (i == 0 ? level : "*L" + std::to_string(d - 1)) + "}";
      }
    }
    level = list + "]";
  }
  return "domain: " + domain + "\ndescriptors: " + level + "\n";
}

}  // namespace floodgate::testing
