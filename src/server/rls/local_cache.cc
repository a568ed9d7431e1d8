// Upstream's local over-limit cache (see local_cache.h).

#include "server/rls/local_cache.h"

#include "common/strings.h"

namespace floodgate::server::rls {

bool LocalCache::Contains(std::string_view key, std::int64_t now_s) {
  if (!enabled()) return false;
  std::lock_guard lock(mu_);
  const auto it = keys_.find(ToAbsl(key));
  return it != keys_.end() && it->second > now_s;
}

void LocalCache::Insert(std::string_view key, std::int64_t expires_s, std::int64_t now_s) {
  const std::size_t cost = key.size() + kEntryBytes;
  if (!enabled() || cost > bytes_) return;
  std::lock_guard lock(mu_);
  if (auto it = keys_.find(ToAbsl(key)); it != keys_.end()) {
    it->second = expires_s;
    return;
  }
  if (used_ + cost > bytes_) {
    absl::erase_if(keys_, [&](const auto& entry) {
      if (entry.second > now_s) return false;
      used_ -= entry.first.size() + kEntryBytes;
      return true;
    });
  }
  while (used_ + cost > bytes_ && !keys_.empty()) {
    used_ -= keys_.begin()->first.size() + kEntryBytes;
    keys_.erase(keys_.begin());
  }
  keys_.emplace(std::string(key), expires_s);
  used_ += cost;
}

std::size_t LocalCache::used_bytes() {
  std::lock_guard lock(mu_);
  return used_;
}

}  // namespace floodgate::server::rls
