// Finding, loading and reloading envoyproxy/ratelimit's config files; upstream's settings.

#include "server/rls/loader.h"

#include <absl/status/status.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <system_error>

#include "common/status_macros.h"
#include "common/strings.h"
#include "server/config_file.h"
#include "server/rls/upstream_settings.h"

namespace floodgate::server::rls {

namespace fs = std::filesystem;

namespace {

bool IsDotName(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name.front() == '.';
}

}  // namespace

absl::StatusOr<RlsSettings> FromEnvironment(absl::FunctionRef<const char*(const char*)> getenv) {
  RlsSettings settings;
  settings.runtime_root = "/srv/runtime_data/current";
  auto text = [&](const char* name, std::string& into) {
    if (const char* value = getenv(name)) into = value;
  };
  auto flag = [&](const char* name, bool& into) -> absl::Status {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') return absl::OkStatus();
    // Go's strconv.ParseBool, as upstream's settings (envconfig) read booleans.
    auto parsed = ParseGoBool(value);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}=\"{}\": {}", name, value, MessageOf(parsed.status())));
    }
    into = *parsed;
    return absl::OkStatus();
  };
  text("RUNTIME_ROOT", settings.runtime_root);
  text("RUNTIME_SUBDIRECTORY", settings.runtime_subdirectory);
  if (const char* app = getenv("RUNTIME_APPDIRECTORY");
      app != nullptr && std::string_view(app) != "config") {
    return absl::InvalidArgumentError(fmt::format(
        "RUNTIME_APPDIRECTORY=\"{}\": floodgate reads the config files from \"config\" only", app));
  }
  bool watch_root = true;  // accepted: the poll watches the whole path either way
  for (auto [name, into] :
       {std::pair{"RUNTIME_IGNOREDOTFILES", &settings.ignore_dotfiles},
        std::pair{"RUNTIME_WATCH_ROOT", &watch_root},
        std::pair{"SHADOW_MODE", &settings.global_shadow},
        std::pair{"LIMIT_RESPONSE_HEADERS_ENABLED", &settings.response_headers}}) {
    if (auto s = flag(name, *into); !s.ok()) return s;
  }
  text("LIMIT_LIMIT_HEADER", settings.limit_header);
  text("LIMIT_REMAINING_HEADER", settings.remaining_header);
  text("LIMIT_RESET_HEADER", settings.reset_header);
  for (const std::string* header :
       {&settings.limit_header, &settings.remaining_header, &settings.reset_header}) {
    if (header->empty()) return absl::InvalidArgumentError("LIMIT_*_HEADER must not be empty");
  }
  // Upstream's counting (docs/envoy.md, "Shared counters"), as `ratelimit` reads it.
  const auto number = [&](const char* name, EnvType type) -> absl::StatusOr<std::optional<EnvValue>> {
    const char* value = getenv(name);
    if (value == nullptr) return std::nullopt;
    auto parsed = ParseEnvValue(type, value);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}=\"{}\": {}", name, value, MessageOf(parsed.status())));
    }
    return std::optional<EnvValue>(*std::move(parsed));
  };
  text("CACHE_KEY_PREFIX", settings.cache_key_prefix);
  std::optional<EnvValue> ratio;
  FG_ASSIGN(ratio, number("NEAR_LIMIT_RATIO", EnvType::kFloat32));
  if (ratio) settings.near_limit_ratio = static_cast<float>(std::get<double>(*ratio));
  std::optional<EnvValue> jitter;
  FG_ASSIGN(jitter, number("EXPIRATION_JITTER_MAX_SECONDS", EnvType::kInt));
  if (jitter) settings.expiration_jitter_max_seconds = std::get<std::int64_t>(*jitter);
  std::optional<EnvValue> bytes;
  FG_ASSIGN(bytes, number("LOCAL_CACHE_SIZE_IN_BYTES", EnvType::kInt));
  if (bytes) {
    const std::int64_t n = std::get<std::int64_t>(*bytes);
    if (n < 0 || n > (std::int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          fmt::format("LOCAL_CACHE_SIZE_IN_BYTES=\"{}\": must be 0 (no cache) to 1073741824", n));
    }
    settings.local_cache_bytes = static_cast<std::size_t>(n);
  }
  bool per_second = false;
  if (auto s = flag("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", settings.stop_increment_when_over);
      !s.ok()) {
    return s;
  }
  if (auto s = flag("REDIS_PERSECOND", per_second); !s.ok()) return s;
  if (per_second) {
    return absl::InvalidArgumentError(
        "REDIS_PERSECOND=true: `floodgate serve` counts on its one store (--store); a second "
        "Redis for per-second limits is `ratelimit`'s (docs/envoy.md)");
  }
  return settings;
}

fs::path ConfigDirectory(const RlsSettings& settings) {
  return fs::path(settings.runtime_root) / settings.runtime_subdirectory / "config";
}

absl::StatusOr<std::vector<fs::path>> ListConfigFiles(const fs::path& directory,
                                                      bool ignore_dotfiles) {
  std::error_code ec;
  std::vector<fs::path> paths;
  fs::recursive_directory_iterator it(directory, ec);
  if (ec) {
    return absl::NotFoundError(
        fmt::format("config directory {}: {}", directory.string(), ec.message()));
  }
  std::size_t entries = 0;
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (++entries > kMaxConfigEntries) {
      return absl::ResourceExhaustedError(
          fmt::format("config directory {}: more than {} entries (files and directories); a "
                      "config directory has at most {} (docs/security.md)",
                      directory.string(), kMaxConfigEntries, kMaxConfigEntries));
    }
    const fs::path& path = it->path();
    std::error_code entry_ec;
    if (ignore_dotfiles && IsDotName(path)) {
      if (it->is_directory(entry_ec)) it.disable_recursion_pending();
      continue;
    }
    // status() follows a symlink (a ConfigMap's files are symlinks). Directories behind
    // symlinks are not descended into (the iterator's default), as upstream; a dangling
    // symlink is skipped, not an error (a swap in progress). Anything else is a candidate,
    // FIFOs and devices included, so that ReadConfigFile refuses them by name.
    const fs::file_status status = it->status(entry_ec);
    if (entry_ec || status.type() == fs::file_type::not_found ||
        status.type() == fs::file_type::directory) {
      continue;
    }
    paths.push_back(path);
  }
  if (ec) {
    return absl::UnavailableError(
        fmt::format("config directory {}: {}", directory.string(), ec.message()));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::StatusOr<std::vector<ConfigFile>> ReadConfigFiles(const fs::path& directory,
                                                        bool ignore_dotfiles) {
  auto paths = ListConfigFiles(directory, ignore_dotfiles);
  if (!paths.ok()) return paths.status();
  std::vector<ConfigFile> files;
  files.reserve(paths->size());
  std::uint64_t bytes = 0;  // the files' together, against kMaxConfigBytes
  for (const fs::path& path : *paths) {
    auto text = ReadConfigFile(path, bytes);
    if (!text.ok()) return text.status();
    bytes += text->size();
    files.push_back({path.string(), *std::move(text)});
  }
  return files;
}

absl::StatusOr<std::shared_ptr<const RlsConfig>> LoadRlsConfig(const RlsSettings& settings) {
  auto files = ReadConfigFiles(ConfigDirectory(settings), settings.ignore_dotfiles);
  if (!files.ok()) return files.status();
  return ParseRlsConfig(*files,
                        settings.merge_domains ? DomainFiles::kMerged : DomainFiles::kOneFileEach);
}

ConfigWatcher::ConfigWatcher(RlsSettings settings, std::chrono::milliseconds interval,
                             OnConfig on_config)
    : settings_(std::move(settings)), interval_(interval), on_config_(std::move(on_config)) {
  seen_ = Stamps();
  poller_ = std::thread([this] { Run(); });
}

ConfigWatcher::~ConfigWatcher() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  poller_.join();
}

std::vector<ConfigWatcher::FileStamp> ConfigWatcher::Stamps() const {
  std::vector<FileStamp> stamps;
  // Too many entries, or none: nothing to stamp, and the load that follows a change says why.
  auto paths = ListConfigFiles(ConfigDirectory(settings_), settings_.ignore_dotfiles);
  if (!paths.ok()) return stamps;
  for (const fs::path& path : *paths) {
    struct stat st {};
    // stat, not lstat: a swapped symlink shows as another inode behind the same path.
    if (::stat(path.c_str(), &st) != 0) continue;
    stamps.push_back(
        {path.string(), static_cast<std::uint64_t>(st.st_dev),
         static_cast<std::uint64_t>(st.st_ino), static_cast<std::uint64_t>(st.st_size),
         static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  return stamps;
}

bool ConfigWatcher::CheckNow() {
  std::lock_guard lock(check_mu_);
  std::vector<FileStamp> stamps = Stamps();
  if (stamps == seen_) return false;
  // Seen either way: a bad config is reported once, not at every poll, until the files
  // change again.
  seen_ = std::move(stamps);
  auto config = LoadRlsConfig(settings_);
  if (!config.ok()) {
    counters_.load_error.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("rls: error loading new configuration, keeping the old one: {}",
                  MessageOf(config.status()));
    return false;
  }
  counters_.load_success.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("rls: configuration reloaded from {} ({} domains)",
               ConfigDirectory(settings_).string(), (*config)->domain_count());
  on_config_(*std::move(config));
  return true;
}

void ConfigWatcher::Run() {
  std::unique_lock lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    CheckNow();
    lock.lock();
  }
}

}  // namespace floodgate::server::rls
