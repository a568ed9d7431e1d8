// The per-lane hot path: enqueue, flush, send, decode, NOSCRIPT -> EVAL, deadlines, stalls.
#include "store/redis/batcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "common/strings.h"
#include "store/redis/decode.h"
#include "store/redis/replicas.h"

namespace floodgate::redis {

void Batcher::Enqueue(Lane& lane, UnitPtr unit) {
  {
    std::lock_guard lock(lane.queue_.mu);
    lane.queue_.queued.push_back(std::move(unit));
    if (lane.queue_.flush_posted) return;
    lane.queue_.flush_posted = true;
  }
  boost::asio::post(io_, [this, &lane] { Flush(lane); });
}

void Batcher::Stage(Lane& lane, UnitPtr unit) {
  std::lock_guard lock(lane.queue_.mu);
  lane.queue_.queued.push_back(std::move(unit));
}

void Batcher::Flush(Lane& lane) {
  std::deque<UnitPtr> queued;
  {
    std::lock_guard lock(lane.queue_.mu);
    lane.queue_.flush_posted = false;
    lane.queue_.holding = options_.max_batch > 1 && lane.connection->ready() &&
                          lane.queue_.calls_out >= kCallsOutWhenBatching &&
                          !lane.queue_.queued.empty();
    if (!lane.queue_.holding) queued.swap(lane.queue_.queued);
  }
  if (lane.queue_.holding) return ArmSweep(lane);  // the sweep answers any held too long
  const Steady::time_point now = Steady::now();
  std::vector<UnitPtr> live;
  live.reserve(queued.size());
  for (auto& pending : queued) {
    if (pending->answered) continue;
    if (!lane.connection->ready()) {
      outcomes_.Complete(*pending, errors_.NotConnected(lane.node));
    } else if (now >= pending->deadline) {
      // Out of time before it was sent, in a queue this thread was too busy to flush.
      outcomes_.Complete(*pending, TimeoutError(), Blame::kOwnBacklog);
    } else {
      lane.queue_.deadlines.push_back(pending);
      live.push_back(std::move(pending));
    }
  }
  ArmSweep(lane);
  // Reservations and counters go by scripts of their own. A lane batching per node sends the keys of
  // every slot of its server in one call: one server's (whose units all carry slot 0), or a
  // cluster node's, through script flags (Redis >= 7.0, lua/node_batch.lua), except units
  // that must go alone or by slot; a lane batching per slot (a cluster node without script
  // flags) keeps a call within one slot. Sorted by slot, a slot's keys are adjacent and a
  // key's decisions stay in order (the sort is stable).
  const bool per_node = lane.batching() == Batching::kPerNode;
  const auto node_wide = [per_node](const Unit& p) {
    return per_node && p.family() == Family::kDecision && !p.route.alone && !p.route.by_slot;
  };
  std::stable_sort(live.begin(), live.end(), [&](const UnitPtr& a, const UnitPtr& b) {
    if (a->family() != b->family()) return a->family() < b->family();
    if (node_wide(*a) != node_wide(*b)) return node_wide(*a);
    return a->route.slot < b->route.slot;
  });
  const auto joins = [&](const Unit& first, const Unit& next) {
    if (first.family() != next.family()) return false;
    if (node_wide(first) && node_wide(next)) return true;
    return !first.route.alone && !next.route.alone && first.route.slot == next.route.slot;
  };
  const std::size_t batch = static_cast<std::size_t>(options_.max_batch);
  for (std::size_t i = 0; i < live.size();) {
    std::size_t end = std::min(live.size(), i + batch);
    std::size_t same = i + 1;
    while (same < end && joins(*live[i], *live[same])) ++same;
    end = same;
    std::vector<UnitPtr> chunk(std::make_move_iterator(live.begin() + i),
                               std::make_move_iterator(live.begin() + end));
    Send(lane, std::move(chunk), ScriptForm::kSha, Asking::kNo);
    i = end;
  }
}

void Batcher::Watch(Lane& lane, const UnitPtr& unit) {
  lane.queue_.deadlines.push_back(unit);
  ArmSweep(lane);
}

void Batcher::Drain(Lane& lane, const absl::Status& status) {
  std::deque<UnitPtr> queued;
  {
    std::lock_guard lock(lane.queue_.mu);
    queued.swap(lane.queue_.queued);
  }
  for (auto& pending : queued) outcomes_.Complete(*pending, status);
  for (auto& pending : lane.queue_.deadlines) outcomes_.Complete(*pending, status);
  lane.queue_.deadlines.clear();
  lane.queue_.sweep.cancel();
}

void Batcher::SendAsked(Lane& lane, std::vector<UnitPtr> chunk) {
  for (auto& p : chunk) lane.queue_.deadlines.push_back(p);
  ArmSweep(lane);
  Send(lane, std::move(chunk), ScriptForm::kSha, Asking::kYes);
}

// One script call for `chunk` (encode.h).
void Batcher::Send(Lane& lane, std::vector<UnitPtr> chunk, ScriptForm form, Asking asking) {
  const EncodedCall call = Encode(chunk, scripts_, form, asking);
  ++counters_.calls;
  if (!SingleCall(chunk)) counters_.batched += call.keys;
  if (call.across_slots) ++counters_.node_batches;
  ++lane.queue_.calls_out;
  const std::string_view command = call.command;
  if (asking == Asking::kYes) {
    // Sent in the same write, right before the script: ASKING covers only the next
    // command on its connection. Its +OK needs no handling; the script's reply tells.
    lane.connection->Send(command.substr(0, call.asking_bytes), [](absl::StatusOr<Reply>) {});
  }
  ReplyHandler answer = [this, &lane, chunk = std::move(chunk), form,
                         asking](absl::StatusOr<Reply> reply) mutable {
    --lane.queue_.calls_out;
    OnReply(lane, std::move(chunk), form, asking, std::move(reply));
    if (lane.queue_.holding) Flush(lane);
  };
  if (acknowledge_ == Acknowledge::kByWait) {
    return SendAcknowledged(*lane.connection, command.substr(call.asking_bytes), options_,
                            lane.node.describe, std::move(answer));
  }
  lane.connection->Send(command.substr(call.asking_bytes), std::move(answer));
}

void Batcher::OnReply(Lane& lane, std::vector<UnitPtr> chunk, ScriptForm form, Asking asking,
                      absl::StatusOr<Reply> reply) {
  if (!reply.ok()) {
    for (auto& p : chunk) outcomes_.Complete(*p, reply.status());
    return;
  }
  const redisReply& r = **reply;
  if (r.type == REDIS_REPLY_ERROR) {
    const std::string_view text = TextOf(r);
    if (text.starts_with("NOSCRIPT") && form == ScriptForm::kSha) {
      ++counters_.noscript;
      return Send(lane, std::move(chunk), ScriptForm::kBody, asking);
    }
    // A cluster's redirects and refusals: the script did not run. (Sentinel: a READONLY
    // primary was demoted; the sentinels are asked again, and the error answers the call.)
    if (errors_.Redirected(lane, text, chunk)) return;
    const absl::Status error =
        absl::InternalError(fmt::format("redis at {}: {}", lane.node.describe, text));
    for (auto& p : chunk) outcomes_.Complete(*p, error);
    return;
  }
  // A reply that does not say what it should: an error for one unit, or for the chunk.
  const auto failed = [&](const absl::Status& status) {
    return absl::InternalError(
        fmt::format("redis at {} {}", lane.node.describe, MessageOf(status)));
  };
  const auto fail_all = [&](const absl::Status& status) {
    const absl::Status error = failed(status);
    for (auto& p : chunk) outcomes_.Complete(*p, error);
  };
  if (chunk[0]->counts()) {
    auto decoded = DecodeCounts(r, chunk.size());
    if (!decoded.ok()) return fail_all(decoded.status());
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      if (!(*decoded)[i].ok()) {
        outcomes_.Complete(*chunk[i], failed((*decoded)[i].status()));
        continue;
      }
      std::get<Count>(chunk[i]->op).count = *(*decoded)[i];
      outcomes_.Complete(*chunk[i], Decision{});
    }
    return;
  }
  if (chunk[0]->reservation()) {
    auto decoded = DecodeReservations(r, chunk.size());
    if (!decoded.ok()) return fail_all(decoded.status());
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      chunk[i]->Held((*decoded)[i].acquired_at);
      outcomes_.Complete(*chunk[i], std::move((*decoded)[i].decision));
    }
    return;
  }
  const bool single = SingleCall(chunk);
  std::vector<std::int64_t> limits;
  for (const auto& p : chunk) {
    for (const Item& item : p->items) limits.push_back(item.policy.limit);
  }
  auto decoded = DecodeDecisions(r, limits, /*with_clock=*/!single);
  if (!decoded.ok()) return fail_all(decoded.status());
  std::size_t k = 0;
  for (auto& p : chunk) {
    if (p->is<Decide>()) {
      absl::StatusOr<Decision>& d = decoded->decisions[k++];
      outcomes_.Complete(*p, d.ok() ? std::move(d) : failed(d.status()));
      continue;
    }
    UnitResult result;
    result.clock_us = decoded->clock_us;
    absl::Status status;
    for (std::size_t i = 0; i < p->items.size(); ++i) {
      absl::StatusOr<Decision>& d = decoded->decisions[k++];
      if (!d.ok()) {
        status = failed(d.status());
      } else {
        result.items.push_back(*d);
      }
    }
    if (status.ok()) {
      outcomes_.CompleteUnit(*p, std::move(result));
    } else {
      outcomes_.CompleteUnit(*p, status);
    }
  }
}

// A decision that timed out is Redis's failure only if Redis has sat on a call of this
// connection for half the timeout or more without answering anything (half: the decision
// may have left a little after it was asked, and a Redis that answers at all answers a
// call in well under a millisecond). Otherwise Redis was answering, call after call, what
// this process queued ahead of the decision (or was asked nothing in time): too much
// asked at once, not a Redis failure, and no reason to open the breaker for every other
// client.
Blame Batcher::BlameForTimeout(const Lane& lane, Steady::time_point now) const {
  return lane.connection->SilentFor(now) >= options_.timeout / 2 ? Blame::kRedis
                                                                 : Blame::kOwnBacklog;
}

absl::Status Batcher::TimeoutError() const {
  return absl::DeadlineExceededError(fmt::format("redis at {} did not answer within {} µs",
                                                 options_.Describe(), options_.timeout.count()));
}

void Batcher::ArmSweep(Lane& lane) {
  if (lane.queue_.sweeping || (lane.queue_.deadlines.empty() && !lane.queue_.holding &&
                               lane.connection->in_flight() == 0)) {
    return;
  }
  lane.queue_.sweeping = true;
  // A tenth of the timeout (1-10 ms): a timed-out decision is answered at most that
  // much late.
  const auto tick = std::clamp<std::chrono::microseconds>(
      options_.timeout / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(10));
  lane.queue_.sweep.expires_after(tick);
  lane.queue_.sweep.async_wait([this, &lane](const boost::system::error_code& ec) {
    if (ec) {
      lane.queue_.sweeping = false;
      return;
    }
    // Behind whatever completed with the timer: a reply the reactor has already read
    // is seen before a decision is judged timed out on a silent Redis (BlameForTimeout).
    boost::asio::post(io_, [this, &lane] {
      lane.queue_.sweeping = false;
      Sweep(lane);
    });
  });
}

void Batcher::Sweep(Lane& lane) {
  const Steady::time_point now = Steady::now();
  bool silent = false;
  while (!lane.queue_.deadlines.empty() && (lane.queue_.deadlines.front()->answered ||
                                            lane.queue_.deadlines.front()->deadline <= now)) {
    // Most were answered already: the error (a formatted message) only for the rest.
    Unit& unit = *lane.queue_.deadlines.front();
    if (!unit.answered) {
      const Blame blame = BlameForTimeout(lane, now);
      silent = silent || blame == Blame::kRedis;
      outcomes_.Complete(unit, TimeoutError(), blame);
    }
    lane.queue_.deadlines.pop_front();
  }
  // A connection whose oldest command has waited this long is taken for dead (a
  // half-open TCP connection raises no error for hours) and replaced.
  const auto stall_limit =
      std::max<Steady::duration>(std::chrono::seconds(1), options_.timeout * 20);
  if (lane.connection->OldestWait(now) > stall_limit) {
    lane.connection->Abort(absl::DeadlineExceededError(
        fmt::format("redis at {} answered nothing for {} ms; reconnecting", lane.node.describe,
                    std::chrono::duration_cast<std::chrono::milliseconds>(stall_limit).count())));
  }
  if (lane.queue_.holding) {
    std::vector<UnitPtr> expired;
    {
      std::lock_guard lock(lane.queue_.mu);
      while (!lane.queue_.queued.empty() && lane.queue_.queued.front()->deadline <= now) {
        expired.push_back(std::move(lane.queue_.queued.front()));
        lane.queue_.queued.pop_front();
      }
    }
    for (auto& pending : expired) {
      const Blame blame = BlameForTimeout(lane, now);
      silent = silent || blame == Blame::kRedis;
      outcomes_.Complete(*pending, TimeoutError(), blame);
    }
  }
  if (silent) errors_.ServerSilent(lane);
  ArmSweep(lane);
}

}  // namespace floodgate::redis
