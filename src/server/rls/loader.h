#pragma once

// Where envoyproxy/ratelimit's config files live and how they are reloaded.
//
// docs/envoy.md, "Where the files are, and reloads": every file under
// <runtime_root>/<runtime_subdirectory>/config/, read again when any of them changes, a Kubernetes
// ConfigMap's symlink swap included.

#include <absl/functional/any_invocable.h>
#include <absl/functional/function_ref.h>
#include <absl/status/statusor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/rls/config.h"
#include "server/rls/engine.h"

namespace floodgate::server::rls {

// upstream's settings from its environment variables (names and defaults of its
// settings.go): RUNTIME_ROOT (/srv/runtime_data/current), RUNTIME_SUBDIRECTORY,
// RUNTIME_APPDIRECTORY (only "config"), RUNTIME_IGNOREDOTFILES, RUNTIME_WATCH_ROOT,
// SHADOW_MODE, LIMIT_RESPONSE_HEADERS_ENABLED, LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER,
// LIMIT_RESET_HEADER. Booleans as Go's strconv.ParseBool reads them; a bad value is an
// error naming the variable. `getenv` returns nullptr for an unset variable.
absl::StatusOr<RlsSettings> FromEnvironment(absl::FunctionRef<const char*(const char*)> getenv);

// The directory whose files make the config: <runtime_root>/<runtime_subdirectory>/config.
std::filesystem::path ConfigDirectory(const RlsSettings& settings);

// The entries (files and directories) a config directory may have (docs/security.md): upstream
// reads one domain per file, and the watcher stats every file each second.
inline constexpr std::size_t kMaxConfigEntries = 1'000;

// Every entry under `directory` but directories (recursively; symlinks followed, but not
// into directories, as upstream's runtime loader walks; dangling symlinks skipped), sorted
// by path; with `ignore_dotfiles`, names starting with '.' are skipped, directories
// included. Refused past kMaxConfigEntries entries.
absl::StatusOr<std::vector<std::filesystem::path>> ListConfigFiles(
    const std::filesystem::path& directory, bool ignore_dotfiles);

// The text of every file ListConfigFiles finds, each read by ReadConfigFile (regular files
// only; all of them together at most kMaxConfigBytes).
absl::StatusOr<std::vector<ConfigFile>> ReadConfigFiles(const std::filesystem::path& directory,
                                                        bool ignore_dotfiles);

// Reads and parses the directory in one go.
absl::StatusOr<std::shared_ptr<const RlsConfig>> LoadRlsConfig(const RlsSettings& settings);

struct LoaderCounters {
  std::atomic<std::uint64_t> load_success{0};
  std::atomic<std::uint64_t> load_error{0};
};

// Watches the config directory and hands each good new config to `on_config`; a bad one
// keeps the old config, is logged once (until the files change again) and counted.
//
// Why a poll and not inotify: a ConfigMap update swaps a symlink (`..data`) two levels
// away from the files, and editors replace files by rename; inotify would need watches
// on every directory on the way, re-armed after each swap, and still a rescan to be
// sure. A poll of (path, resolved inode, size, mtime) of every file sees all of these
// with one code path, costs a few stat calls per interval, and bounds the delay.
class ConfigWatcher {
 public:
  using OnConfig = absl::AnyInvocable<void(std::shared_ptr<const RlsConfig>)>;

  // Starts polling at once; the files as they are now count as seen (the caller loaded
  // them already with LoadRlsConfig).
  ConfigWatcher(RlsSettings settings, std::chrono::milliseconds interval, OnConfig on_config);
  ~ConfigWatcher();  // stops and joins the poller
  ConfigWatcher(const ConfigWatcher&) = delete;
  ConfigWatcher& operator=(const ConfigWatcher&) = delete;

  // Thread-safe.
  const LoaderCounters& counters() const { return counters_; }
  // Checks the directory now (also what the poller calls): true when a new config was
  // handed over. Thread-safe with the poller (serialised).
  bool CheckNow();

 private:
  struct FileStamp {
    std::string path;
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    friend bool operator==(const FileStamp&, const FileStamp&) = default;
  };
  std::vector<FileStamp> Stamps() const;
  void Run();

  const RlsSettings settings_;
  const std::chrono::milliseconds interval_;
  OnConfig on_config_;
  LoaderCounters counters_;
  std::mutex check_mu_;  // one check at a time
  std::vector<FileStamp> seen_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace floodgate::server::rls
