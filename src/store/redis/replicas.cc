// wait_replicas: a script call answered only once WAIT says enough replicas have its writes.
#include "store/redis/replicas.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "store/redis/resp.h"

namespace floodgate::redis {

void SendAcknowledged(Connection& connection, std::string_view call,
                      const RedisStoreOptions& options, std::string_view describe,
                      ReplyHandler handler) {
  // WAIT 0 would block for ever; the decision's own deadline is the store timeout.
  const std::int64_t timeout_ms = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout).count());
  std::string wait;
  const std::string replicas = std::to_string(options.wait_replicas);
  const std::string timeout = std::to_string(timeout_ms);
  AppendCommand(wait, {"WAIT", replicas, timeout});
  // Replies come in order (a failed connection fails its handlers in order too): the
  // call's reply is held here when WAIT's arrives.
  auto held = std::make_shared<std::optional<absl::StatusOr<Reply>>>();
  connection.Send(call, [held](absl::StatusOr<Reply> reply) { *held = std::move(reply); });
  connection.Send(
      wait, [held, handler = std::move(handler), needed = options.wait_replicas, timeout_ms,
             where = std::string(describe)](absl::StatusOr<Reply> acknowledged) mutable {
        absl::StatusOr<Reply> reply =
            held->has_value() ? std::move(**held) : absl::StatusOr<Reply>(acknowledged.status());
        // An error reply (NOSCRIPT, READONLY) wrote nothing: it goes on as it is.
        if (reply.ok() && (*reply)->type != REDIS_REPLY_ERROR) {
          if (!acknowledged.ok()) {
            reply = acknowledged.status();
          } else if ((*acknowledged)->type == REDIS_REPLY_ERROR) {
            // A replica refuses WAIT: the call's answer (a denial writes nothing, so no
            // READONLY stopped it) came from a server that is no primary.
            reply = std::move(acknowledged);
          } else if ((*acknowledged)->type != REDIS_REPLY_INTEGER ||
                     (*acknowledged)->integer < needed) {
            reply = absl::UnavailableError(fmt::format(
                "redis at {}: {} of the {} replicas wait_replicas asks for acknowledged the call "
                "within {} ms",
                where, (*acknowledged)->type == REDIS_REPLY_INTEGER ? (*acknowledged)->integer : 0,
                needed, timeout_ms));
          }
        }
        handler(std::move(reply));
      });
}

}  // namespace floodgate::redis
