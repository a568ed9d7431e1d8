#pragma once

// A memory shard's entries: one key's 40-byte state, stored densely in fixed-size chunks.

#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "core/algorithms.h"
#include "core/state_kind.h"
#include "store/memory/compact_key.h"

namespace floodgate::memory {

// One key's state: 40 bytes. The state is a union chosen by the key's kind tag (a
// std::variant would add 8 bytes per key for its own tag, which the key already has).
class Entry {
 public:
  union State {
    core::GcraState gcra;
    core::SmoothBucketState smooth;
    core::IntervalBucketState interval;
    core::FixedWindowState fixed;
    core::SlidingWindowState sliding;
    core::SlidingLog* log;  // sliding_log and concurrency (core::KeepsLog); owned, freed by ~Entry
    std::int64_t blocked_until;  // a block's entry (Shard::BlockProbe): µs on the Unix epoch
  };
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) == 16);

  Entry(CompactKey key, State state, std::uint32_t expires_s)
      : key_(key), state_(state), expires_s_(expires_s) {}
  ~Entry() {
    if (core::KeepsLog(kind())) std::unique_ptr<core::SlidingLog> owned(state_.log);
  }
  // The moved-from entry gives up its sliding log, if it has one.
  Entry(Entry&& other) noexcept
      : key_(other.key_),
        state_(other.state_),
        expires_s_(other.expires_s_),
        referenced_(other.referenced_),
        log_bits_(other.log_bits_) {
    if (core::KeepsLog(kind())) other.state_.log = nullptr;
  }
  Entry& operator=(Entry&& other) noexcept {
    if (this != &other) {
      std::destroy_at(this);
      std::construct_at(this, std::move(other));
    }
    return *this;
  }

  // New state for the same key (an old sliding log is freed).
  void Replace(State state, std::uint32_t expires_s) {
    if (core::KeepsLog(kind()) && state_.log != state.log) {
      std::unique_ptr<core::SlidingLog> owned(state_.log);
    }
    state_ = state;
    expires_s_ = expires_s;
    referenced_ = true;
  }

  const CompactKey& key() const { return key_; }
  CompactKey& key() { return key_; }
  core::StateKind kind() const { return static_cast<core::StateKind>(key_.tag()); }
  State& state() { return state_; }
  // An expiry that saturated (past 2106) never comes: such a key leaves by eviction.
  bool expired(std::uint32_t now_s) const {
    return now_s >= expires_s_ && expires_s_ != std::numeric_limits<std::uint32_t>::max();
  }
  void set_expires(std::uint32_t expires_s) { expires_s_ = expires_s; }
  // The CLOCK algorithm's reference bit: set by every decision, cleared as the eviction
  // hand passes.
  bool referenced() const { return referenced_; }
  void set_referenced(bool referenced) { referenced_ = referenced; }
  // The sliding log's heap bytes as the shard last counted them (max_bytes), kept in the
  // entry's padding: a log's capacity is a power of two, so its log2 + 1 (0: none).
  std::size_t counted_log_bytes() const {
    return log_bits_ == 0 ? 0 : std::size_t{1} << (log_bits_ - 1);
  }
  void set_counted_log_bytes(std::size_t bytes) {
    log_bits_ = bytes == 0 ? 0 : static_cast<std::uint8_t>(std::countr_zero(bytes) + 1);
  }

 private:
  CompactKey key_;
  State state_;
  std::uint32_t expires_s_;  // whole seconds on the Unix epoch, rounded up; saturates in 2106
  bool referenced_ = false;  // a new key has not been used again yet
  std::uint8_t log_bits_ = 0;
};
static_assert(sizeof(Entry) == 40);

// Entries stored densely in fixed-size chunks: no slack from load factors (the index
// carries that), no reallocation copies as a shard grows, and pages of a chunk not yet
// used are never touched, so they cost no resident memory.
class EntryArray {
 public:
  EntryArray() = default;
  EntryArray(const EntryArray&) = delete;
  EntryArray& operator=(const EntryArray&) = delete;
  ~EntryArray() {
    while (size_ > 0) pop_back();
  }

  std::uint32_t size() const { return size_; }
  Entry& operator[](std::uint32_t i) { return *slot(i); }
  const Entry& operator[](std::uint32_t i) const { return *slot(i); }

  std::uint32_t push_back(Entry&& entry) {
    if ((size_ >> kChunkBits) == chunks_.size()) {
      chunks_.push_back(std::make_unique_for_overwrite<Chunk>());
    }
    std::construct_at(slot(size_), std::move(entry));
    return size_++;
  }
  void pop_back() {
    std::destroy_at(slot(--size_));
    // Keep one spare chunk so a shard hovering at a chunk boundary does not thrash.
    if (chunks_.size() > (size_ >> kChunkBits) + 2) chunks_.pop_back();
  }

 private:
  static constexpr unsigned kChunkBits = 10;  // 1024 entries, 40 KiB
  struct Chunk {
    alignas(Entry) std::byte bytes[sizeof(Entry) << kChunkBits];
  };
  Entry* slot(std::uint32_t i) const {
    return std::launder(reinterpret_cast<Entry*>(chunks_[i >> kChunkBits]->bytes)) +
           (i & ((1u << kChunkBits) - 1));
  }

  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::uint32_t size_ = 0;
};

}  // namespace floodgate::memory
