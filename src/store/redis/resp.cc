#include "store/redis/resp.h"

#include <absl/status/status.h>
#include <fmt/format.h>

#include <cstdlib>

namespace floodgate::redis {

void AppendCommand(std::string& out, const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (std::string_view arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* command = nullptr;
  const int size =
      redisFormatCommandArgv(&command, static_cast<int>(args.size()), argv.data(), lengths.data());
  if (size > 0) out.append(command, static_cast<std::size_t>(size));
  redisFreeCommand(command);
}

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {}
ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

void ReplyReader::Reset() {
  redisReaderFree(reader_);
  reader_ = redisReaderCreate();
}

absl::Status ReplyReader::Feed(const char* data, std::size_t size) {
  if (redisReaderFeed(reader_, data, size) != REDIS_OK) {
    return absl::InternalError(fmt::format("redis protocol error: {}", reader_->errstr));
  }
  return absl::OkStatus();
}

absl::StatusOr<Reply> ReplyReader::Next() {
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
    return absl::InternalError(fmt::format("redis protocol error: {}", reader_->errstr));
  }
  return Reply(static_cast<redisReply*>(reply));
}

}  // namespace floodgate::redis
