// Redis Sentinel: which server is the primary now (asked, confirmed, followed on failover).
#include "store/redis/sentinel.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "common/strings.h"
#include "store/redis/resp.h"

namespace floodgate::redis {

namespace {

// A storm of dropped connections or READONLY replies asks the sentinels once per this.
constexpr auto kRoundInterval = std::chrono::milliseconds(100);

// "<name> <old ip> <old port> <new ip> <new port>": +switch-master's payload.
std::optional<RedisEndpoint> SwitchedTo(std::string_view payload, std::string_view master) {
  std::vector<std::string_view> fields;
  ForEachItem(payload, ' ', [&](std::string_view field) { fields.push_back(field); });
  RedisEndpoint endpoint;
  if (fields.size() != 5 || fields[0] != master) return std::nullopt;
  const std::string_view port = fields[4];
  if (std::from_chars(port.data(), port.data() + port.size(), endpoint.port).ec != std::errc()) {
    return std::nullopt;
  }
  endpoint.host = std::string(fields[3]);
  return endpoint;
}

// "slave <ip>:<port> <ip> <port> @ <master name> <master ip> <master port>": the payload of
// the failover events about the replica being promoted (sentinel.c's "%@" of a replica).
std::optional<RedisEndpoint> PromotedReplica(std::string_view payload, std::string_view master) {
  std::vector<std::string_view> fields;
  ForEachItem(payload, ' ', [&](std::string_view field) { fields.push_back(field); });
  RedisEndpoint endpoint;
  if (fields.size() != 8 || fields[0] != "slave" || fields[4] != "@" || fields[5] != master) {
    return std::nullopt;
  }
  const std::string_view port = fields[3];
  if (std::from_chars(port.data(), port.data() + port.size(), endpoint.port).ec != std::errc()) {
    return std::nullopt;
  }
  endpoint.host = std::string(fields[2]);
  return endpoint;
}

// "master <name> <ip> <port>" (sentinel.c's "%@" of a primary): the abort events' payload.
bool AboutMaster(std::string_view payload, std::string_view master) {
  std::vector<std::string_view> fields;
  ForEachItem(payload, ' ', [&](std::string_view field) { fields.push_back(field); });
  return fields.size() >= 2 && fields[0] == "master" && fields[1] == master;
}

}  // namespace

// WAIT 0 behind every call even without wait_replicas: a replica refuses it (replicas.h).
SentinelTopology::SentinelTopology(const TopologyParts& parts)
    : Topology(parts, Batching::kPerNode, Acknowledge::kByWait),
      round_timer_(parts.io),
      ask_timer_(parts.io) {
  // As StandaloneTopology's: made before the I/O thread runs.
  if (options_.wait_replicas > 0) {
    replicas_ = std::make_unique<ReplicaWatch>(io_, options_.wait_replicas,
                                               [this] { return primary(); });
  }
}

absl::Status SentinelTopology::WaitStarted() {
  return startup_.WaitForConnection(options_, options_.connections_per_server());
}

void SentinelTopology::Dispatch(UnitPtr unit, Steady::time_point now) {
  SendTo(primary(), std::move(unit), now);
}

std::vector<Node*> SentinelTopology::Primaries() {
  if (Node* now = primary()) return {now};
  return {};
}

std::vector<HandshakeStep> SentinelTopology::HandshakeOf(Lane& lane) {
  std::vector<HandshakeStep> steps;
  handshake_.Login(lane.node.describe, steps);
  handshake_.ConfirmPrimary(lane.node.describe, steps);
  handshake_.LoadScripts(lane.node.describe, steps);
  return steps;
}

absl::Status SentinelTopology::NotConnected(const Node&) {
  return absl::UnavailableError(LastError());
}

void SentinelTopology::LaneReady(Lane&) {
  startup_.LaneReady();
  if (replicas_ && replicas_->online() < 0) replicas_->AskNow();
}

void SentinelTopology::LaneDown(Lane& lane, const absl::Status& status) {
  if (lane.node.retired()) return;  // an old primary, stopped on purpose
  startup_.LaneDown(lane, status);
  if (&lane.node == primary()) Discover();
}

void SentinelTopology::Start() {
  sentinels_.resize(options_.seeds.size());
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    sentinels_[i].endpoint = options_.seeds[i];
    sentinels_[i].asks = Connect(i, false);
    sentinels_[i].listens = Connect(i, true);
  }
  for (Sentinel& sentinel : sentinels_) {
    sentinel.asks->Start();
    sentinel.listens->Start();
  }
  if (replicas_) replicas_->Start();
}

void SentinelTopology::Stop() {
  stopped_ = true;
  ++ask_generation_;
  round_timer_.cancel();
  ask_timer_.cancel();
  for (Sentinel& sentinel : sentinels_) {
    sentinel.asks->Stop();
    sentinel.listens->Stop();
  }
}

std::unique_ptr<Connection> SentinelTopology::Connect(std::size_t index, bool listen) {
  ConnectionOptions connection;
  connection.host = sentinels_[index].endpoint.host;
  connection.port = sentinels_[index].endpoint.port;
  connection.connect_timeout = options_.connect_timeout;
  connection.reconnect_min = options_.reconnect_min;
  connection.reconnect_max = options_.reconnect_max;
  connection.tls = tls_;
  connection.tls_server_name = options_.tls_server_name;
  const std::string where = HostPort(connection.host, connection.port);
  Connection::Hooks hooks;
  const auto check = [this, where](const redisReply& reply) {
    if (reply.type != REDIS_REPLY_ERROR) return absl::OkStatus();
    const std::string_view text = TextOf(reply);
    if (text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") ||
        text.find("AUTH") != std::string_view::npos) {
      return absl::PermissionDeniedError(fmt::format(
          "sentinel at {} refused us: {} (its password is the sentinel_password= option{})", where,
          text, options_.sentinel_password.empty() ? ", not given" : ""));
    }
    return absl::FailedPreconditionError(fmt::format("sentinel at {}: {}", where, text));
  };
  hooks.handshake = [this, listen, check] {
    std::vector<HandshakeStep> steps(1);
    if (options_.sentinel_password.empty()) {
      AppendCommand(steps[0].command, {"PING"});
    } else if (options_.sentinel_user.empty()) {
      AppendCommand(steps[0].command, {"AUTH", options_.sentinel_password});
    } else {
      AppendCommand(steps[0].command, {"AUTH", options_.sentinel_user, options_.sentinel_password});
    }
    steps[0].check = check;
    if (listen) {
      HandshakeStep& subscribe = steps.emplace_back();
      AppendCommand(subscribe.command,
                    {"SUBSCRIBE", "+switch-master", std::string(kPromotionEvent),
                     std::string(kAbortEvent)});
      subscribe.check = check;
    }
    return steps;
  };
  hooks.on_ready = [this, index] {
    sentinels_[index].failed = false;
    // A sentinel (re)connected: it may know of a failover we did not hear about.
    Discover();
  };
  hooks.on_down = [this, index, listen](const absl::Status& status) {
    Sentinel& sentinel = sentinels_[index];
    sentinel.last_error = std::string(MessageOf(status));
    if (!listen) sentinel.failed = true;
    if (!found_) Discover();  // start-up: a round ending on every sentinel down says so
  };
  if (listen) hooks.on_push = [this](const redisReply& message) { OnMessage(message); };
  return std::make_unique<Connection>(io_, std::move(connection), std::move(hooks));
}

bool SentinelTopology::Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>&) {
  // READONLY: a write refused; WAIT refused "with replica instances" (replicas.h).
  const bool replica = error.starts_with("READONLY") ||
                       error.find("WAIT cannot be used with replica") != std::string_view::npos;
  if (!replica || &lane.node != primary()) return false;
  // Demoted, yet still connected (a sentinel closes a demoted primary's connections, so
  // this is rare): the connection is redone, and ROLE keeps it from serving as a replica.
  lane.connection->Abort(absl::UnavailableError(
      fmt::format("redis at {} is read-only now: {}", lane.node.describe, error)));
  Discover();
  return false;
}

// Asks the sentinels now, or as soon as the last round is kRoundInterval old.
void SentinelTopology::Discover() {
  if (stopped_) return;
  if (asking_) {
    ask_again_ = true;
    return;
  }
  const Steady::time_point earliest = last_round_ + kRoundInterval;
  if (Steady::now() >= earliest) return StartRound();
  if (round_scheduled_) return;
  round_scheduled_ = true;
  round_timer_.expires_at(earliest);
  round_timer_.async_wait([this](const boost::system::error_code& ec) {
    round_scheduled_ = false;
    if (!ec) Discover();
  });
}

void SentinelTopology::StartRound() {
  asking_ = true;
  ask_again_ = false;
  round_settled_ = true;
  last_round_ = Steady::now();
  round_errors_.clear();
  AskFrom(0);
}

// Asks sentinel `index`, or the next one connected; each has connect_timeout to answer.
void SentinelTopology::AskFrom(std::size_t index) {
  for (; index < sentinels_.size(); ++index) {
    Sentinel& sentinel = sentinels_[index];
    if (sentinel.asks->ready()) break;
    if (!sentinel.failed) round_settled_ = false;  // still making its first connection
    round_errors_.push_back(
        fmt::format("{}: {}", HostPort(sentinel.endpoint.host, sentinel.endpoint.port),
                    sentinel.last_error.empty() ? "not connected yet" : sentinel.last_error));
  }
  if (index == sentinels_.size()) return EndRound(false);
  const std::uint64_t generation = ++ask_generation_;
  ask_timer_.expires_after(options_.connect_timeout);
  ask_timer_.async_wait([this, index, generation](const boost::system::error_code& ec) {
    if (ec || generation != ask_generation_) return;
    ++ask_generation_;
    OnAnswer(index,
             absl::DeadlineExceededError(fmt::format(
                 "no answer within {} ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(options_.connect_timeout)
                     .count())));
  });
  std::string command;
  AppendCommand(command, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.sentinel_master});
  sentinels_[index].asks->Send(command, [this, index, generation](absl::StatusOr<Reply> reply) {
    if (generation != ask_generation_) return;  // timed out, or stopping
    ++ask_generation_;
    ask_timer_.cancel();
    OnAnswer(index, std::move(reply));
  });
}

void SentinelTopology::OnAnswer(std::size_t index, absl::StatusOr<Reply> reply) {
  const Sentinel& sentinel = sentinels_[index];
  std::string error;
  if (!reply.ok()) {
    error = std::string(MessageOf(reply.status()));
  } else if (const redisReply& r = **reply; r.type == REDIS_REPLY_ERROR) {
    error = std::string(TextOf(r));
  } else if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 ||
             r.element[0]->type != REDIS_REPLY_STRING || r.element[1]->type != REDIS_REPLY_STRING) {
    error = fmt::format("knows no primary named \"{}\"", options_.sentinel_master);
  } else {
    RedisEndpoint endpoint{std::string(TextOf(*r.element[0])), 0};
    const std::string_view port = TextOf(*r.element[1]);
    if (std::from_chars(port.data(), port.data() + port.size(), endpoint.port).ec == std::errc()) {
      // A sentinel that has not heard of the failover yet (they spread it every 2 s)
      // names the primary we left: not while the new one answers.
      // Nor while the replica we moved to is being promoted: its ROLE says replica for a
      // moment, and the sentinels name the old primary until +switch-master.
      Node* now = primary();
      const bool promoting = Steady::now() < promoting_until_;
      if (!(endpoint == left_ && now != nullptr && (promoting || now->PickLane() != nullptr))) {
        SwitchTo(endpoint);
      }
      return EndRound(true);
    }
    error = fmt::format("named a primary on port \"{}\"", port);
  }
  round_errors_.push_back(
      fmt::format("{}: {}", HostPort(sentinel.endpoint.host, sentinel.endpoint.port), error));
  AskFrom(index + 1);
}

void SentinelTopology::EndRound(bool found) {
  asking_ = false;
  found_ = found_ || found;
  if (!found && !found_ && round_settled_) {
    std::string why;
    for (const std::string& error : round_errors_) why += (why.empty() ? "" : "; ") + error;
    startup_.TopologyRefused(absl::UnavailableError(
        fmt::format("redis sentinel {}: no sentinel named the primary of \"{}\" ({})",
                    options_.Describe(), options_.sentinel_master, why)));
  }
  // Until a primary is known, keep asking (every kRoundInterval, and when one connects).
  if (ask_again_ || primary() == nullptr) Discover();
}

void SentinelTopology::OnMessage(const redisReply& message) {
  // ["message", channel, payload]; subscribe confirmations are arrays too.
  if (message.type != REDIS_REPLY_ARRAY || message.elements != 3 ||
      TextOf(*message.element[0]) != "message") {
    return;
  }
  const std::string_view channel = TextOf(*message.element[1]);
  const std::string_view payload = TextOf(*message.element[2]);
  if (channel == "+switch-master") {
    if (auto endpoint = SwitchedTo(payload, options_.sentinel_master)) {
      promoting_until_ = Steady::time_point{};
      SwitchTo(*endpoint);
    }
  } else if (channel == kPromotionEvent) {
    // The leader is about to send REPLICAOF NO ONE to this replica. From the moment the
    // replica runs it, what the old primary acknowledges is never replicated: the old
    // primary takes no more decisions now, and the replica takes them once its ROLE says
    // master (until then they are answered by on_error). +switch-master comes only after
    // the other replicas were reconfigured, ~0.7 s later: a window of lost decisions.
    if (auto endpoint = PromotedReplica(payload, options_.sentinel_master)) {
      promoting_until_ = Steady::now() + kPromotionWait;
      ++counters_.early_switches;
      SwitchTo(*endpoint);
    }
  } else if (channel == kAbortEvent && AboutMaster(payload, options_.sentinel_master)) {
    // The promotion did not happen: whatever the sentinels name is the primary.
    promoting_until_ = Steady::time_point{};
    left_ = RedisEndpoint{"", 0};
    Discover();
  }
}

void SentinelTopology::SwitchTo(const RedisEndpoint& endpoint) {
  Node* old = primary();
  if (old != nullptr && old->endpoint == endpoint) return;
  Node& next = NodeFor(endpoint);  // connects, and confirms with ROLE
  primary_.store(&next, std::memory_order_release);
  if (replicas_) replicas_->Forget();  // the new primary's replicas, once it says
  if (old == nullptr) return;
  ++counters_.primary_switches;
  left_ = old->endpoint;
  // The old primary's calls are answered by on_error (they may have run there, unseen by
  // the new one); its connections stop for good.
  old->Retire(absl::UnavailableError(
      fmt::format("the primary moved from {} to {}", old->describe, next.describe)));
}

}  // namespace floodgate::redis
