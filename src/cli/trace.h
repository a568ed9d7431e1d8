#pragma once

// Replay traces: JSON Lines `{"t": <µs>, "key": "...", "cost": 1}` (docs/service.md, "replay").

#include <absl/status/statusor.h>
#include <floodgate/store.h>
#include <simdjson.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::cli {

struct TraceEvent {
  std::int64_t t;
  std::string_view key;  // valid until the next Parse()
  std::int64_t cost;
  // An operation line ({"op": "reset"}, or "refund" / "penalize" with "units"; docs/algorithms.md
  // "Operating a key") instead of a decision; its cost is unused.
  std::optional<KeyOperation> op;
  std::int64_t units = 0;
};

// Parses one trace line. Fields other than t, key and cost are ignored, so traces cut
// from access logs may carry more; anything else malformed is an error naming the field.
class TraceParser {
 public:
  absl::StatusOr<TraceEvent> Parse(std::string_view line);

 private:
  simdjson::dom::parser parser_;
  simdjson::padded_string buffer_;
};

// Reads lines from a file or stdin, counting bytes so progress can be reported as a
// true fraction of the input when its size is known.
class LineReader {
 public:
  LineReader(std::FILE* file, bool owned);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // False at end of input; the line excludes its '\n'.
  bool Next(std::string_view& line);
  bool failed() const { return std::ferror(file_) != 0; }
  std::uint64_t bytes_read() const { return bytes_read_; }
  // 0 when unknown (a pipe).
  std::uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::FILE* file_;
  bool owned_;
  char* buffer_ = nullptr;  // owned by getline(), released with free()
  std::size_t capacity_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace floodgate::cli
