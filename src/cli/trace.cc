// Replay traces: one JSON Lines event parsed, and a trace read line by line.

#include "cli/trace.h"

#include <absl/status/status.h>
#include <floodgate/policy.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "common/strings.h"

namespace floodgate::cli {

namespace {

absl::Status Bad(std::string why) { return absl::InvalidArgumentError(std::move(why)); }

}  // namespace

absl::StatusOr<TraceEvent> TraceParser::Parse(std::string_view line) {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end; copy into a padded buffer.
  // The DOM parser validates the whole line, trailing bytes included.
  if (buffer_.size() < line.size()) buffer_ = simdjson::padded_string(line.size() * 2);
  if (!line.empty()) std::memcpy(buffer_.data(), line.data(), line.size());  // may be null
  simdjson::dom::element doc;
  if (const auto error = parser_.parse(buffer_.data(), line.size(), false).get(doc); error) {
    return Bad(fmt::format("not valid JSON ({})", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return Bad("not a JSON object");

  bool has_t = false;
  std::string_view key;
  bool has_key = false;
  TraceEvent event{0, {}, 1, std::nullopt, 0};
  bool has_units = false;
  for (const auto [name, value] : object) {
    if (name == "t") {
      if (value.get_int64().get(event.t) != simdjson::SUCCESS || event.t < 0) {
        return Bad("\"t\" must be a whole number of microseconds >= 0");
      }
      has_t = true;
    } else if (name == "key") {
      if (value.get_string().get(key) != simdjson::SUCCESS) return Bad("\"key\" must be a string");
      has_key = true;
    } else if (name == "cost") {
      if (value.get_int64().get(event.cost) != simdjson::SUCCESS || event.cost < 0 ||
          event.cost > kMaxCost) {
        return Bad("\"cost\" must be a whole number between 0 and 1000000000");
      }
    } else if (name == "op") {
      std::string_view op;
      if (value.get_string().get(op) != simdjson::SUCCESS) return Bad("\"op\" must be a string");
      if (op == "reset") {
        event.op = KeyOperation::kReset;
      } else if (op == "refund") {
        event.op = KeyOperation::kRefund;
      } else if (op == "penalize") {
        event.op = KeyOperation::kPenalize;
      } else {
        return Bad("\"op\" must be reset, refund or penalize");
      }
    } else if (name == "units") {
      if (value.get_int64().get(event.units) != simdjson::SUCCESS || event.units < 1 ||
          event.units > kMaxCost) {
        return Bad("\"units\" must be a whole number between 1 and 1000000000");
      }
      has_units = true;
    }
  }
  if (event.op && *event.op != KeyOperation::kReset && !has_units) {
    return Bad(fmt::format("\"op\": \"{}\" needs \"units\"", KeyOperationName(*event.op)));
  }
  if (has_units && (!event.op || *event.op == KeyOperation::kReset)) {
    return Bad("\"units\" is for a refund or a penalty");
  }
  if (!has_t) return Bad("missing \"t\"");
  if (!has_key) return Bad("missing \"key\"");
  if (key.empty()) return Bad("\"key\" must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return Bad(fmt::format("\"key\" is {} bytes; the limit is {}", key.size(), kMaxKeyBytes));
  }
  event.key = key;
  return event;
}

LineReader::LineReader(std::FILE* file, bool owned) : file_(file), owned_(owned) {
  struct stat st {};
  if (fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode)) total_bytes_ = st.st_size;
}

LineReader::~LineReader() {
  std::free(buffer_);
  if (owned_) std::fclose(file_);
}

bool LineReader::Next(std::string_view& line) {
  const ssize_t n = getline(&buffer_, &capacity_, file_);
  if (n < 0) return false;
  bytes_read_ += static_cast<std::uint64_t>(n);
  std::size_t size = static_cast<std::size_t>(n);
  if (size > 0 && buffer_[size - 1] == '\n') --size;
  if (size > 0 && buffer_[size - 1] == '\r') --size;
  line = std::string_view(buffer_, size);
  return true;
}

}  // namespace floodgate::cli
