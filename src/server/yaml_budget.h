#pragma once

// YAML counted before it is built: nodes with aliases expanded, no alias loops, no key twice.
//
// docs/security.md, "Configuration files". yaml-cpp builds an alias as the node it names,
// shared, so a 3 KB file of aliases ten wide and seven deep is 10^7 nodes to whoever walks
// it (the key check, the loader): counted here from the parser's events, in time and memory
// linear in the text, before yaml-cpp builds a node.

#include <absl/status/status.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::server {

// The nodes one config may have, aliases expanded (a map, a list, a key, a value: one
// each): floodgate's config file, or envoyproxy/ratelimit's config directory, all its
// files together. yaml-cpp takes ~500 bytes per node it builds; a rule is ~10 nodes.
inline constexpr std::uint64_t kMaxYamlNodes = 1'000'000;

// A budget of YAML nodes shared by the files of one config. Not thread-safe: one per load.
class YamlBudget {
 public:
  explicit YamlBudget(std::uint64_t max_nodes = kMaxYamlNodes) : max_nodes_(max_nodes) {}

  // Checks the first document of `text` (what YAML::Load reads) and charges its nodes,
  // refusing, with "source:line: reason":
  //  - more nodes than the budget has left, every alias counted as the nodes it repeats;
  //  - an alias inside the node its anchor names (yaml-cpp would build a loop);
  //  - a key given twice in one mapping (yaml-cpp keeps both and finds the first).
  // Text that is not YAML passes after what it parsed: the caller's YAML::Load then
  // reports the syntax error in the caller's words.
  absl::Status Charge(std::string_view text, const std::string& source);

  std::uint64_t used() const { return used_; }

 private:
  std::uint64_t max_nodes_;
  std::uint64_t used_ = 0;
};

}  // namespace floodgate::server
