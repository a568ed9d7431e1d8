// wait_replicas: a script call answered only once WAIT says enough replicas have its writes.
#include "store/redis/replicas.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "store/redis/node.h"
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

int OnlineReplicas(std::string_view info) {
  bool primary = false;
  int online = 0;
  std::size_t start = 0;
  while (start < info.size()) {
    std::size_t end = info.find('\n', start);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(start, end - start);
    start = end + 1;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line == "role:master") primary = true;
    // slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
    if (line.starts_with("slave") && line.size() > 5 && line[5] >= '0' && line[5] <= '9' &&
        line.find("state=online") != std::string_view::npos) {
      ++online;
    }
  }
  return primary ? online : -1;
}

ReplicaWatch::ReplicaWatch(boost::asio::io_context& io, int needed,
                           absl::AnyInvocable<Node*()> primary)
    : timer_(io), needed_(needed), primary_(std::move(primary)) {}

void ReplicaWatch::Start() { Ask(); }

void ReplicaWatch::Stop() {
  stopped_ = true;
  timer_.cancel();
}

absl::Status ReplicaWatch::Health() const {
  const int online = online_.load(std::memory_order_relaxed);
  if (online >= needed_) return absl::OkStatus();
  std::lock_guard lock(mu_);
  if (online < 0) {
    return absl::UnavailableError(fmt::format(
        "wait_replicas={}: the primary has not said yet how many replicas it has online",
        needed_));
  }
  return absl::UnavailableError(fmt::format(
      "wait_replicas={}: the primary at {} has {} replica(s) online, so every decision is "
      "answered by on_error (run {} replicas: one more than wait_replicas keeps deciding "
      "through a failover)",
      needed_, where_, online, needed_ + 1));
}

void ReplicaWatch::Ask() {
  if (stopped_) return;
  Node* node = primary_();
  Lane* lane = node != nullptr ? node->PickLane() : nullptr;
  if (lane != nullptr) {
    std::string command;
    AppendCommand(command, {"INFO", "replication"});
    lane->connection->Send(command, [this, where = node->describe](absl::StatusOr<Reply> reply) {
      if (stopped_ || !reply.ok()) return;  // a dropped connection: the next round asks again
      const redisReply& r = **reply;
      if (r.type == REDIS_REPLY_STRING) {
        Record(OnlineReplicas(TextOf(r)), where);
      }
    });
  }
  timer_.expires_after(kInterval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Ask();
  });
}

void ReplicaWatch::Record(int online, const std::string& where) {
  online = std::max(online, 0);  // a server whose INFO is no primary's has none for us
  const int before = online_.exchange(online);
  {
    std::lock_guard lock(mu_);
    where_ = where;
  }
  const bool enough = online >= needed_;
  if (before >= 0 && (before >= needed_) == enough) return;  // nothing changed
  if (enough) {
    spdlog::info("redis at {}: {} replica(s) online, as wait_replicas={} needs: decisions are "
                 "acknowledged again",
                 where, online, needed_);
  } else {
    spdlog::warn("redis at {}: {} replica(s) online where wait_replicas={} needs {}: every "
                 "decision is answered by on_error, and the store is not ready (/readyz), "
                 "until enough are (run {} replicas)",
                 where, online, needed_, needed_, needed_ + 1);
  }
}

}  // namespace floodgate::redis
