#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace floodgate::memory {

// A store key in 16 bytes: a kind tag, the length, and the bytes inline when they fit
// (13 bytes: user ids, IPv4 addresses) or on the heap. std::string would take 32 bytes
// per key before its own heap block, which alone would spend half of the 64-byte
// per-key budget the store is held to.
class CompactKey {
 public:
  static constexpr std::size_t kInlineBytes = 13;

  CompactKey() { std::memset(raw_, 0, sizeof raw_); }
  CompactKey(std::uint8_t tag, std::string_view bytes) {
    std::memset(raw_, 0, sizeof raw_);
    raw_[0] = tag;
    const auto size = static_cast<std::uint16_t>(bytes.size());
    std::memcpy(raw_ + 1, &size, sizeof size);
    if (bytes.size() <= kInlineBytes) {
      std::memcpy(raw_ + 3, bytes.data(), bytes.size());
    } else {
      auto heap = std::make_unique_for_overwrite<char[]>(bytes.size());
      std::memcpy(heap.get(), bytes.data(), bytes.size());
      set_heap(heap.release());  // owned by this object; freed in the destructor
    }
  }
  ~CompactKey() {
    if (!is_inline()) std::unique_ptr<char[]> owned(heap());
  }
  CompactKey(CompactKey&& other) noexcept {
    std::memcpy(raw_, other.raw_, sizeof raw_);
    std::memset(other.raw_, 0, sizeof other.raw_);
  }
  CompactKey& operator=(CompactKey&& other) noexcept {
    if (this != &other) {
      std::destroy_at(this);
      std::construct_at(this, std::move(other));
    }
    return *this;
  }

  std::uint8_t tag() const { return raw_[0]; }
  std::size_t size() const {
    std::uint16_t size;
    std::memcpy(&size, raw_ + 1, sizeof size);
    return size;
  }
  std::string_view bytes() const {
    return {is_inline() ? reinterpret_cast<const char*>(raw_ + 3) : heap(), size()};
  }
  bool Equals(std::uint8_t tag, std::string_view bytes) const {
    return raw_[0] == tag && size() == bytes.size() &&
           std::memcmp(this->bytes().data(), bytes.data(), bytes.size()) == 0;
  }

 private:
  bool is_inline() const { return size() <= kInlineBytes; }
  char* heap() const {
    char* p;
    std::memcpy(&p, raw_ + 8, sizeof p);
    return p;
  }
  void set_heap(char* p) { std::memcpy(raw_ + 8, &p, sizeof p); }

  alignas(8) unsigned char raw_[16];
};
static_assert(sizeof(CompactKey) == 16);

}  // namespace floodgate::memory
