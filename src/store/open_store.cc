// OpenStore: a store from its URL (memory://, or one of the Redis store's schemes).

#include <absl/status/status.h>
#include <floodgate/memory_store.h>
#include <floodgate/redis_store.h>
#include <floodgate/store.h>
#include <fmt/format.h>

namespace floodgate {

namespace {

bool IsMemory(std::string_view url) { return url.empty() || url.starts_with("memory:"); }

bool IsRedis(std::string_view url) {
  return url.starts_with("redis://") || url.starts_with("rediss://") ||
         url.starts_with("redis+unix://") || url.starts_with("rediss+unix://") ||
         url.starts_with("redis-cluster://") || url.starts_with("redis-sentinel://") ||
         url.starts_with("rediss-sentinel://");
}

absl::Status Unsupported(std::string_view url) {
  const std::size_t scheme = url.find("://");
  // unix:// (redis-py's and go-redis's form) names a transport, not a store.
  const bool socket = url.starts_with("unix://");
  return absl::InvalidArgumentError(
      fmt::format("unsupported store \"{}\" in \"{}\" ({}known: memory://, redis://, "
                  "rediss://, redis+unix://, redis-cluster://, redis-sentinel://)",
                  url.substr(0, scheme == std::string_view::npos ? url.size() : scheme), url,
                  socket ? "Redis on a unix socket is redis+unix:///path; " : ""));
}

}  // namespace

absl::Status CheckStoreUrl(std::string_view url) {
  if (IsMemory(url)) return MemoryStoreOptions::FromUrl(url.empty() ? "memory://" : url).status();
  if (IsRedis(url)) return RedisStoreOptions::FromUrl(url).status();
  return Unsupported(url);
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url) {
  if (IsMemory(url)) {
    auto options = MemoryStoreOptions::FromUrl(url.empty() ? "memory://" : url);
    if (!options.ok()) return options.status();
    return std::make_unique<MemoryStore>(*std::move(options));
  }
  if (IsRedis(url)) {
    auto options = RedisStoreOptions::FromUrl(url);
    if (!options.ok()) return options.status();
    auto store = RedisStore::Open(*std::move(options));
    if (!store.ok()) return store.status();
    return std::unique_ptr<Store>(*std::move(store));
  }
  return Unsupported(url);
}

}  // namespace floodgate
