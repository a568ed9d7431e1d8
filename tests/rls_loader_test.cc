// Upstream's config layout and reloads, and upstream's environment variables.
//
// Every file of <root>/<subdirectory>/config, a file change, a Kubernetes ConfigMap symlink swap, a
// bad file keeping the old config.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "server/config_file.h"
#include "server/rls/loader.h"

namespace floodgate::server::rls {
namespace {

namespace fs = std::filesystem;
namespace ext = ::envoy::extensions::common::ratelimit::v3;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "rls_loader_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  // Written beside and renamed, as editors and kubelet do: never half a file.
  const fs::path temp = path.string() + ".tmp~";
  std::ofstream(temp) << text;
  fs::rename(temp, path);
}

std::string Domain(const std::string& name, int limit) {
  return "domain: " + name +
         "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
         "requests_per_unit: " +
         std::to_string(limit) + "}\n";
}

std::uint32_t LimitOf(const RlsConfig& config, const std::string& domain) {
  ext::RateLimitDescriptor descriptor;
  auto* entry = descriptor.add_entries();
  entry->set_key("k");
  entry->set_value("v");
  const RlsLimit* limit = config.Find(domain, descriptor);
  return limit == nullptr ? 0 : limit->requests_per_unit;
}

fs::path config_path(const TempDir& dir, const std::string& name) {
  return dir.path() / "ratelimit" / "config" / name;
}

RlsSettings SettingsFor(const fs::path& root, bool ignore_dotfiles = false) {
  RlsSettings settings;
  settings.runtime_root = root.string();
  settings.runtime_subdirectory = "ratelimit";
  settings.ignore_dotfiles = ignore_dotfiles;
  return settings;
}

TEST(RlsLoaderTest, ReadsEveryFileOfTheConfigDirectory) {
  TempDir dir;
  const fs::path config = dir.path() / "ratelimit" / "config";
  Write(config / "a.yaml", Domain("a", 1));
  Write(config / "nested" / "b.yml", Domain("b", 2));
  Write(config / ".hidden.yaml", Domain("hidden", 3));
  Write(dir.path() / "ratelimit" / "elsewhere.yaml", Domain("elsewhere", 4));
  auto loaded = LoadRlsConfig(SettingsFor(dir.path()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(LimitOf(**loaded, "a"), 1u);
  EXPECT_EQ(LimitOf(**loaded, "b"), 2u);
  EXPECT_EQ(LimitOf(**loaded, "hidden"), 3u);
  EXPECT_EQ(LimitOf(**loaded, "elsewhere"), 0u);
  auto without_dotfiles = LoadRlsConfig(SettingsFor(dir.path(), true));
  ASSERT_TRUE(without_dotfiles.ok()) << without_dotfiles.status();
  EXPECT_EQ(LimitOf(**without_dotfiles, "hidden"), 0u);
  EXPECT_EQ(LimitOf(**without_dotfiles, "a"), 1u);
}

TEST(RlsLoaderTest, DuplicateDomainAcrossFilesIsRefusedWithTheFile) {
  TempDir dir;
  const fs::path config = dir.path() / "ratelimit" / "config";
  Write(config / "a.yaml", Domain("same", 1));
  Write(config / "b.yaml", Domain("same", 2));
  auto loaded = LoadRlsConfig(SettingsFor(dir.path()));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            (config / "b.yaml").string() + ":1: duplicate domain 'same' in config file");
}

// Only regular files are read, each by its size: a FIFO or a device is refused by name
// (they were skipped), a /proc file too (its size is not its contents: /proc/kmsg blocked
// `config check`). A symlink to a regular file, anywhere, is read as upstream reads it.
TEST(RlsLoaderTest, ReadsRegularFilesOnlyAndFollowsSymlinksToThem) {
  TempDir dir;
  const fs::path config = dir.path() / "ratelimit" / "config";
  Write(config / "a.yaml", Domain("a", 1));
  Write(dir.path() / "elsewhere" / "b.yaml", Domain("b", 2));
  fs::create_symlink(dir.path() / "elsewhere" / "b.yaml", config / "b.yaml");
  auto loaded = LoadRlsConfig(SettingsFor(dir.path()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(LimitOf(**loaded, "b"), 2u);

  const auto refused = [&](const std::string& name) {
    auto config = LoadRlsConfig(SettingsFor(dir.path()));
    fs::remove(config_path(dir, name));
    return config.ok() ? std::string("loaded") : std::string(config.status().message());
  };
  ASSERT_EQ(::mkfifo((config / "f.yaml").c_str(), 0600), 0);
  EXPECT_EQ(refused("f.yaml"), (config / "f.yaml").string() +
                                   ": a FIFO: config files are read from regular files only");
  fs::create_symlink("/dev/null", config / "null.yaml");
  EXPECT_EQ(refused("null.yaml"),
            (config / "null.yaml").string() +
                ": a character device: config files are read from regular files only");
  fs::create_symlink("/proc/self/status", config / "status.yaml");
  EXPECT_EQ(refused("status.yaml"),
            (config / "status.yaml").string() +
                ": a file of /proc or /sys, not a config file (its size is not its contents)");
  EXPECT_TRUE(LoadRlsConfig(SettingsFor(dir.path())).ok());
}

// The bounds are the directory's: 16 MiB of files together (sparse files here, refused by
// their sizes), 1,000 entries.
TEST(RlsLoaderTest, BoundsTheDirectoryAsAWhole) {
  TempDir dir;
  const fs::path config = dir.path() / "ratelimit" / "config";
  Write(config / "a.yaml", Domain("a", 1));
  std::ofstream(config / "b.yaml").close();
  fs::resize_file(config / "b.yaml", kMaxConfigBytes - 10);
  auto loaded = LoadRlsConfig(SettingsFor(dir.path()));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(
      loaded.status().message(),
      ::testing::HasSubstr("b.yaml: 16777206 bytes after " + std::to_string(Domain("a", 1).size()) +
                           " in the directory's other files"));
  fs::remove(config / "b.yaml");
  for (std::size_t i = 1; i < kMaxConfigEntries; ++i) {
    std::ofstream(config / ("d" + std::to_string(i) + ".yaml"))
        << Domain("d" + std::to_string(i), 1);
  }
  auto full = LoadRlsConfig(SettingsFor(dir.path()));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full)->domain_count(), kMaxConfigEntries);
  std::ofstream(config / "one_more.yaml") << Domain("one_more", 1);
  EXPECT_EQ(LoadRlsConfig(SettingsFor(dir.path())).status().message(),
            "config directory " + config.string() +
                ": more than 1000 entries (files and directories); a config directory has at "
                "most 1000 (docs/security.md)");
}

// Collects the configs a watcher hands over.
class Received {
 public:
  ConfigWatcher::OnConfig Callback() {
    return [this](std::shared_ptr<const RlsConfig> config) {
      std::lock_guard lock(mu_);
      latest_ = std::move(config);
      ++count_;
    };
  }
  int count() const {
    std::lock_guard lock(mu_);
    return count_;
  }
  std::shared_ptr<const RlsConfig> latest() const {
    std::lock_guard lock(mu_);
    return latest_;
  }
  // Polls (bounded) until `count` configs arrived.
  bool WaitFor(int count) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (this->count() >= count) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const RlsConfig> latest_;
  int count_ = 0;
};

TEST(RlsLoaderTest, ReloadsAChangedFileAndKeepsTheOldConfigOnABadOne) {
  TempDir dir;
  const fs::path file = dir.path() / "ratelimit" / "config" / "a.yaml";
  Write(file, Domain("a", 1));
  Received received;
  // A long interval: the test drives the checks itself with CheckNow.
  ConfigWatcher watcher(SettingsFor(dir.path()), std::chrono::hours(1), received.Callback());
  EXPECT_FALSE(watcher.CheckNow());  // nothing changed
  Write(file, Domain("a", 2));
  ASSERT_TRUE(watcher.CheckNow());
  ASSERT_EQ(received.count(), 1);
  EXPECT_EQ(LimitOf(*received.latest(), "a"), 2u);
  EXPECT_EQ(watcher.counters().load_success.load(), 1u);

  Write(file, "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n");
  EXPECT_FALSE(watcher.CheckNow());
  EXPECT_EQ(received.count(), 1);  // the old config stays
  EXPECT_EQ(watcher.counters().load_error.load(), 1u);
  EXPECT_FALSE(watcher.CheckNow());  // reported once, not at every poll
  EXPECT_EQ(watcher.counters().load_error.load(), 1u);

  Write(file, Domain("a", 3));
  ASSERT_TRUE(watcher.CheckNow());
  EXPECT_EQ(LimitOf(*received.latest(), "a"), 3u);
}

// The watcher sees every entry the load reads: a FIFO or a device appearing is a change whose
// load is refused, counted and logged once (it was not seen at all); the old config stays.
TEST(RlsLoaderTest, AFifoAppearingIsABadConfigToTheWatcher) {
  TempDir dir;
  const fs::path config = dir.path() / "ratelimit" / "config";
  Write(config / "a.yaml", Domain("a", 1));
  Received received;
  ConfigWatcher watcher(SettingsFor(dir.path()), std::chrono::hours(1), received.Callback());
  ASSERT_EQ(::mkfifo((config / "f.yaml").c_str(), 0600), 0);
  EXPECT_FALSE(watcher.CheckNow());
  EXPECT_EQ(watcher.counters().load_error.load(), 1u);
  EXPECT_EQ(received.count(), 0);
  fs::remove(config / "f.yaml");
  fs::create_symlink("/proc/self/status", config / "status.yaml");
  EXPECT_FALSE(watcher.CheckNow());
  EXPECT_EQ(watcher.counters().load_error.load(), 2u);
  fs::remove(config / "status.yaml");
  ASSERT_TRUE(watcher.CheckNow());
  EXPECT_EQ(LimitOf(*received.latest(), "a"), 1u);
}

TEST(RlsLoaderTest, FollowsAConfigMapSymlinkSwap) {
  // Kubernetes' layout: config -> ..data/config, ..data -> ..2026_01; an update writes
  // ..2026_02 and swaps ..data atomically.
  TempDir dir;
  const fs::path sub = dir.path() / "ratelimit";
  Write(sub / "..2026_01" / "config" / "a.yaml", Domain("a", 1));
  fs::create_directory_symlink("..2026_01", sub / "..data");
  fs::create_directory_symlink("..data/config", sub / "config");
  auto first = LoadRlsConfig(SettingsFor(dir.path(), true));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(LimitOf(**first, "a"), 1u);

  Received received;
  ConfigWatcher watcher(SettingsFor(dir.path(), true), std::chrono::milliseconds(20),
                        received.Callback());
  Write(sub / "..2026_02" / "config" / "a.yaml", Domain("a", 2));
  fs::create_directory_symlink("..2026_02", sub / "..data_tmp");
  fs::rename(sub / "..data_tmp", sub / "..data");  // the atomic swap
  // The poller (every 20 ms) sees it: polled with a bounded deadline.
  ASSERT_TRUE(received.WaitFor(1));
  EXPECT_EQ(LimitOf(*received.latest(), "a"), 2u);
}

TEST(RlsLoaderTest, EnvironmentAsUpstreamReadsIt) {
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto defaults = FromEnvironment(getenv);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->runtime_root, "/srv/runtime_data/current");
  EXPECT_EQ(defaults->runtime_subdirectory, "");
  EXPECT_FALSE(defaults->ignore_dotfiles);
  EXPECT_FALSE(defaults->global_shadow);
  EXPECT_FALSE(defaults->response_headers);
  EXPECT_EQ(defaults->limit_header, "RateLimit-Limit");
  EXPECT_EQ(defaults->remaining_header, "RateLimit-Remaining");
  EXPECT_EQ(defaults->reset_header, "RateLimit-Reset");
  EXPECT_EQ(ConfigDirectory(*defaults), fs::path("/srv/runtime_data/current/config"));

  env = {{"RUNTIME_ROOT", "/data"},
         {"RUNTIME_SUBDIRECTORY", "ratelimit"},
         {"RUNTIME_IGNOREDOTFILES", "true"},
         {"SHADOW_MODE", "1"},
         {"LIMIT_RESPONSE_HEADERS_ENABLED", "T"},
         {"LIMIT_RESET_HEADER", "X-Reset"},
         {"RUNTIME_WATCH_ROOT", "false"}};
  auto set = FromEnvironment(getenv);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(ConfigDirectory(*set), fs::path("/data/ratelimit/config"));
  EXPECT_TRUE(set->ignore_dotfiles);
  EXPECT_TRUE(set->global_shadow);
  EXPECT_TRUE(set->response_headers);
  EXPECT_EQ(set->reset_header, "X-Reset");

  env = {{"SHADOW_MODE", "yes"}};
  auto bad = FromEnvironment(getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("SHADOW_MODE=\"yes\""));
  env = {{"RUNTIME_APPDIRECTORY", "other"}};
  EXPECT_FALSE(FromEnvironment(getenv).ok());
}

}  // namespace
}  // namespace floodgate::server::rls
