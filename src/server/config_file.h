#pragma once

// A config file read only when it is a regular file, its size bounded before a byte is read.
//
// docs/security.md, "Configuration files": floodgate's config file and every file of
// envoyproxy/ratelimit's config directory are read through here, at `config check`, at
// serve's start and at every reload.

#include <absl/status/statusor.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace floodgate::server {

// The bytes one config may have: floodgate's config file, or the RLS config directory's
// files together. yaml-cpp holds ~500 bytes per node, so the bound on nodes
// (kMaxYamlNodes) is what bounds memory; this one bounds the read and the parse before it.
inline constexpr std::uint64_t kMaxConfigBytes = std::uint64_t{16} << 20;

// The text of the file at `path`: a regular file, or a symlink to one (a Kubernetes
// ConfigMap's files are symlinks, swapped on update). Refused before it is opened when it
// is anything else (a FIFO or a device would block the read or do what opening it does),
// when it lives in /proc or /sys (whose sizes are not their contents: /proc/kmsg blocks),
// or when its size, with the `used` bytes of the same config's other files, passes
// kMaxConfigBytes. At most the size stat gave is read, so a file growing meanwhile is cut
// there, never read on without end.
absl::StatusOr<std::string> ReadConfigFile(const std::filesystem::path& path,
                                           std::uint64_t used = 0);

}  // namespace floodgate::server
