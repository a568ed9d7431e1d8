#pragma once

// RESP: commands formatted here (resp.cc says why), replies read by hiredis's reader.
//
// We use no hiredis sockets; the bytes travel over our own Asio connection.

#include <absl/status/statusor.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::redis {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Appends one command in RESP to `out`; arguments are binary-safe.
void AppendCommand(std::string& out, const std::vector<std::string_view>& args);

// Incremental reply parser over a byte stream. Not thread-safe.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  absl::Status Feed(const char* data, std::size_t size);
  // Drops buffered bytes (a new connection starts a new stream).
  void Reset();
  // The next complete reply, nullptr when more bytes are needed, or a protocol error.
  absl::StatusOr<Reply> Next();

 private:
  absl::Status Error() const;

  redisReader* reader_ = nullptr;
  int refused_elements_ = 0;  // an array refused for its size (see resp.cc)
};

// The text of a status, error or string reply.
inline std::string_view TextOf(const redisReply& reply) {
  return {reply.str == nullptr ? "" : reply.str, reply.str == nullptr ? 0 : reply.len};
}

}  // namespace floodgate::redis
