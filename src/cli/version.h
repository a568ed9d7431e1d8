#pragma once

// What `floodgate --version` prints: version, git revision, and what the binary can speak.

#include <string>
#include <string_view>

namespace floodgate::cli {

// The git revision of the build (generated at build time by cmake/build_info.cmake,
// "unknown" outside a git checkout); defined in the binary, not in floodgate_cli.
extern const char kGitRevision[];

// Several lines: "floodgate 0.1.0 (git 1a2b3c4d5e6f)", the stores and the Redis protocol
// features built in, the Envoy rate limit service, and the library versions they use.
std::string VersionText(std::string_view revision);

}  // namespace floodgate::cli
