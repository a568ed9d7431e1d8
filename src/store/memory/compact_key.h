#pragma once

// How a memory shard holds its keys: 16 bytes each, inline or in a compacting arena.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace floodgate::memory {

// Where a shard keeps the bytes of keys too long to store inline: bump-allocated 4 KiB
// blocks, compacted once a quarter of their bytes belong to deleted keys. A malloc per
// key would add its 8-24 bytes of chunk overhead to every such key, more than a third of
// the per-key budget; here a key costs its own bytes plus at most 25% garbage.
class KeyArena {
 public:
  static constexpr std::size_t kBlockBytes = 4096;

  // Copies `bytes` (at most kBlockBytes) into the arena.
  char* Store(std::string_view bytes) {
    if (blocks_.empty() || kBlockBytes - used_in_last_ < bytes.size()) {
      garbage_ += blocks_.empty() ? 0 : kBlockBytes - used_in_last_;  // the unused tail
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(kBlockBytes));
      used_in_last_ = 0;
    }
    char* at = blocks_.back().get() + used_in_last_;
    std::memcpy(at, bytes.data(), bytes.size());
    used_in_last_ += bytes.size();
    live_ += bytes.size();
    return at;
  }
  // `size` bytes stored earlier are no longer referenced.
  void Release(std::size_t size) {
    live_ -= size;
    garbage_ += size;
  }
  bool WantsCompaction() const { return garbage_ >= kBlockBytes && garbage_ * 3 > live_; }
  std::size_t blocks() const { return blocks_.size(); }

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::size_t used_in_last_ = 0;
  std::size_t live_ = 0;
  std::size_t garbage_ = 0;
};

// A store key in 16 bytes: a kind tag, the length, and the bytes inline when they fit
// (13 bytes: user ids, IPv4 addresses) or else a pointer into the shard's KeyArena.
// std::string would take 32 bytes per key before its own heap block. A plain value: the
// arena owns the bytes, and the shard tells it when a key is dropped.
class CompactKey {
 public:
  static constexpr std::size_t kInlineBytes = 13;

  CompactKey(std::uint8_t tag, std::string_view bytes, KeyArena& arena) {
    std::memset(raw_, 0, sizeof raw_);
    raw_[0] = tag;
    const auto size = static_cast<std::uint16_t>(bytes.size());
    std::memcpy(raw_ + 1, &size, sizeof size);
    if (bytes.size() <= kInlineBytes) {
      std::memcpy(raw_ + 3, bytes.data(), bytes.size());
    } else {
      set_heap(arena.Store(bytes));
    }
  }

  std::uint8_t tag() const { return raw_[0]; }
  std::size_t size() const {
    std::uint16_t size;
    std::memcpy(&size, raw_ + 1, sizeof size);
    return size;
  }
  bool in_arena() const { return size() > kInlineBytes; }
  std::string_view bytes() const {
    return {in_arena() ? heap() : reinterpret_cast<const char*>(raw_ + 3), size()};
  }
  bool Equals(std::uint8_t tag, std::string_view bytes) const {
    if (raw_[0] != tag || size() != bytes.size()) return false;
    if (in_arena()) return std::memcmp(heap(), bytes.data(), bytes.size()) == 0;
    // An inline key is at most 13 bytes: compared here, where a call to memcmp cost more
    // than the comparison itself (every decision compares at least one key), as two
    // overlapping words (a byte loop was ~6 instructions a byte, measured).
    const std::size_t n = bytes.size();
    const unsigned char* mine = raw_ + 3;
    if (n >= 8) {
      return Word<std::uint64_t>(mine) == Word<std::uint64_t>(bytes.data()) &&
             Word<std::uint64_t>(mine + n - 8) == Word<std::uint64_t>(bytes.data() + n - 8);
    }
    if (n >= 4) {
      return Word<std::uint32_t>(mine) == Word<std::uint32_t>(bytes.data()) &&
             Word<std::uint32_t>(mine + n - 4) == Word<std::uint32_t>(bytes.data() + n - 4);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (mine[i] != static_cast<unsigned char>(bytes[i])) return false;
    }
    return true;
  }
  // Copies the bytes into `arena` (compaction); inline keys stay as they are.
  void MoveTo(KeyArena& arena) {
    if (in_arena()) set_heap(arena.Store(bytes()));
  }

 private:
  template <class W>
  static W Word(const void* at) {
    W w;
    std::memcpy(&w, at, sizeof w);
    return w;
  }
  const char* heap() const {
    const char* p;
    std::memcpy(&p, raw_ + 8, sizeof p);
    return p;
  }
  void set_heap(const char* p) { std::memcpy(raw_ + 8, &p, sizeof p); }

  alignas(8) unsigned char raw_[16];
};
static_assert(sizeof(CompactKey) == 16 && std::is_trivially_copyable_v<CompactKey>);

}  // namespace floodgate::memory
