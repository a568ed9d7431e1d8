// RESP: commands formatted by hand, replies read by hiredis's reader.

#include "store/redis/resp.h"

#include <absl/status/status.h>
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace floodgate::redis {

void AppendCommand(std::string& out, const std::vector<std::string_view>& args) {
  // Written here rather than by hiredis's redisFormatCommandArgv, which formats every
  // length with sprintf into a buffer of its own that is then copied: measured as 8% of
  // the client's CPU per decision under batching. The bytes are the same (resp_test
  // compares them with hiredis's on random arguments).
  char digits[24];
  const auto header = [&](char kind, std::size_t n) {
    out.push_back(kind);
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    out.append(digits, end);
    out.append("\r\n");
  };
  std::size_t bytes = 16;
  for (std::string_view arg : args) bytes += arg.size() + 16;
  out.reserve(out.size() + bytes);
  header('*', args.size());
  for (std::string_view arg : args) {
    header('$', arg.size());
    out.append(arg);
    out.append("\r\n");
  }
}

namespace {

// hiredis 0.14 allocates an array reply's element table from the length the peer
// announces, before any element arrives: "*900000000\r\n" alone asks for 7 GB (found by
// tests/fuzz/fuzz_resp). Our replies hold at most a few thousand elements, so arrays
// past this are refused. The reader's own functions are kept and wrapped, so replies
// are still built (and freed by freeReplyObject) exactly as hiredis builds them.
constexpr int kMaxElements = 1 << 20;
// Bytes buffered for one reply: a peer that streams a huge string is cut off too.
constexpr std::size_t kMaxBuffered = 256 << 20;

const redisReplyObjectFunctions& HiredisFunctions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReader* reader = redisReaderCreate();
    const redisReplyObjectFunctions copy = *reader->fn;
    redisReaderFree(reader);
    return copy;
  }();
  return functions;
}

void* CreateBoundedArray(const redisReadTask* task, int elements) {
  if (elements > kMaxElements) {
    if (task->privdata != nullptr)
      *static_cast<int*>(task->privdata) = elements;  // for the message
    return nullptr;                                   // hiredis fails the reader
  }
  return HiredisFunctions().createArray(task, elements);
}

const redisReplyObjectFunctions& BoundedFunctions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReplyObjectFunctions bounded = HiredisFunctions();
    bounded.createArray = &CreateBoundedArray;
    return bounded;
  }();
  return functions;
}

}  // namespace

ReplyReader::ReplyReader() { Reset(); }
ReplyReader::~ReplyReader() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

void ReplyReader::Reset() {
  if (reader_ != nullptr) redisReaderFree(reader_);
  // hiredis takes a non-const table but only reads it.
  reader_ =
      redisReaderCreateWithFunctions(const_cast<redisReplyObjectFunctions*>(&BoundedFunctions()));
  reader_->privdata = &refused_elements_;
  refused_elements_ = 0;
}

absl::Status ReplyReader::Error() const {
  if (refused_elements_ > 0) {
    return absl::InternalError(
        fmt::format("redis protocol error: a reply of {} elements (at most {} accepted)",
                    refused_elements_, kMaxElements));
  }
  return absl::InternalError(fmt::format("redis protocol error: {}", reader_->errstr));
}

absl::Status ReplyReader::Feed(const char* data, std::size_t size) {
  if (redisReaderFeed(reader_, data, size) != REDIS_OK) return Error();
  if (reader_->len - reader_->pos > kMaxBuffered) {
    return absl::InternalError(fmt::format(
        "redis protocol error: more than {} MiB buffered for one reply", kMaxBuffered >> 20));
  }
  return absl::OkStatus();
}

absl::StatusOr<Reply> ReplyReader::Next() {
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK) return Error();
  return Reply(static_cast<redisReply*>(reply));
}

}  // namespace floodgate::redis
