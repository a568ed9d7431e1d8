// Redis Cluster's routing rules as pure functions: key slots, CLUSTER SLOTS, redirects.

#include "store/redis/cluster.h"

#include <absl/status/status.h>
#include <fmt/format.h>

#include <boost/crc.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/strings.h"
#include "store/redis/resp.h"

namespace floodgate::redis {

int SlotOf(std::string_view key) {
  if (const std::size_t open = key.find('{'); open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  // Redis's CRC16 is CRC-16/XMODEM: polynomial 0x1021, no reflection, zero init and xor.
  boost::crc_optimal<16, 0x1021, 0, 0, false, false> crc;
  crc.process_bytes(key.data(), key.size());
  return crc.checksum() & (kClusterSlots - 1);
}

std::string_view SlotTag(int slot) {
  // Base-36 strings in order of length: every slot has one of at most 4 characters (the
  // search covers all 16384 slots after ~160,000 strings, a few milliseconds, once).
  static const std::vector<std::string> tags = [] {
    std::vector<std::string> table(kClusterSlots);
    int missing = kClusterSlots;
    constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (std::uint64_t n = 0; missing > 0; ++n) {
      std::string tag;
      for (std::uint64_t m = n;; m = m / kDigits.size() - 1) {
        tag.insert(tag.begin(), kDigits[m % kDigits.size()]);
        if (m < kDigits.size()) break;
      }
      std::string& entry = table[SlotOf(tag)];
      if (entry.empty()) {
        entry = std::move(tag);
        --missing;
      }
    }
    return table;
  }();
  return tags.at(static_cast<std::size_t>(slot));
}

absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(const redisReply& reply,
                                                         std::string_view asked_host) {
  if (reply.type == REDIS_REPLY_ERROR) {
    return absl::FailedPreconditionError(std::string(TextOf(reply)));
  }
  const auto bad = [] {
    return absl::InternalError("CLUSTER SLOTS answered with an unexpected reply");
  };
  if (reply.type != REDIS_REPLY_ARRAY) return bad();
  std::vector<SlotRange> ranges;
  for (std::size_t i = 0; i < reply.elements; ++i) {
    const redisReply& range = *reply.element[i];
    // [first, last, [host, port, id, ...], replicas...]
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        range.element[0]->type != REDIS_REPLY_INTEGER ||
        range.element[1]->type != REDIS_REPLY_INTEGER ||
        range.element[2]->type != REDIS_REPLY_ARRAY || range.element[2]->elements < 2) {
      return bad();
    }
    const redisReply& primary = *range.element[2];
    const int host_type = primary.element[0]->type;
    if ((host_type != REDIS_REPLY_STRING && host_type != REDIS_REPLY_NIL) ||
        primary.element[1]->type != REDIS_REPLY_INTEGER) {
      return bad();
    }
    SlotRange r;
    r.first = static_cast<int>(range.element[0]->integer);
    r.last = static_cast<int>(range.element[1]->integer);
    if (r.first < 0 || r.last >= kClusterSlots || r.first > r.last) return bad();
    // An empty or NULL endpoint (cluster-preferred-endpoint-type unknown-endpoint) means
    // the host that was asked; "?" a node that announces no hostname it can be reached
    // by: its slots stay unserved rather than sent somewhere wrong.
    const std::string_view host =
        host_type == REDIS_REPLY_NIL ? std::string_view() : TextOf(*primary.element[0]);
    if (host == "?") continue;
    r.primary.host = std::string(host.empty() ? asked_host : host);
    if (primary.element[1]->integer < 1 || primary.element[1]->integer > 65535) return bad();
    r.primary.port = static_cast<std::uint16_t>(primary.element[1]->integer);
    ranges.push_back(std::move(r));
  }
  return ranges;
}

std::optional<Redirect> ParseRedirect(std::string_view error) {
  Redirect redirect;
  if (error.starts_with("MOVED ")) {
    redirect.kind = Redirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    redirect.kind = Redirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (!ParseDecimal(error.substr(0, space), redirect.slot) || redirect.slot < 0 ||
      redirect.slot >= kClusterSlots) {
    return std::nullopt;
  }
  const std::string_view address = error.substr(space + 1);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;  // ":port": the host asked
  std::string_view host = address.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  redirect.target.host = std::string(host);
  if (!ParseDecimal(address.substr(colon + 1), redirect.target.port) || redirect.target.port == 0) {
    return std::nullopt;
  }
  return redirect;
}

}  // namespace floodgate::redis
