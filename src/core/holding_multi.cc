// A multi-decision that holds reservations or leases, on a store that cannot do it atomically.
//
// A multi-decision that holds reservations or leases (HoldOf(item) > 0), on a store that
// cannot hold them in the same atomic step as the other items (Redis: a reservation's
// record is written by the reservations' script, the other items by the decisions' one).
// docs/leases.md, "In a multi-decision", is the contract; in short: reserve every holding
// item in item order, then decide the other items all or nothing, and release what was
// reserved when anything denies. Never over-admits: each step consumes before the next
// is asked, and only a denial gives back.

#include <absl/algorithm/container.h>
#include <floodgate/store.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/multi.h"

namespace floodgate {

namespace {

// The request, owned across the steps (the caller's items may be gone once it returns),
// and the answer being put together.
struct HoldingMulti {
  std::vector<std::string> keys, names;
  std::vector<CheckItem> items;  // their keys and names point into `keys`, `names`
  std::optional<TimePoint> now;
  std::vector<std::size_t> holding;  // the items holding a reservation, in item order
  std::vector<std::size_t> others;   // every other item, in item order
  std::size_t next = 0;              // the next of `holding` to reserve
  MultiDecision answer;
  MultiCallback done;

  HoldingMulti(const MultiRequest& request, MultiCallback callback)
      : now(request.now), done(std::move(callback)) {
    const std::size_t n = request.items.size();
    keys.reserve(n);
    names.reserve(n);
    items.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      CheckItem item = request.items[i];
      item.key = keys.emplace_back(item.key);
      item.name = names.emplace_back(item.name);
      items.push_back(item);
      (HoldOf(item).count() > 0 ? holding : others).push_back(i);
    }
    answer.items.resize(n);
  }

  // An item no step could ask about (its peek failed).
  void NotAsked(std::size_t i) {
    answer.items[i] = core::NotConsulted(items[i]);
    answer.unknown.push_back(i);
  }
};

}  // namespace

void Store::DecideAllHoldingAsync(const MultiRequest& request, MultiCallback done) {
  // Each step's callback moves the state on to the next step; a step may answer inline
  // (memory-like stores) or on the store's I/O thread; answered inline, the steps recurse
  // at most 2 x kMaxItems + 1 deep.
  struct Steps {
    Store* store;  // each callback holds a copy of the steps: the store, nothing more

    void Reserve(std::unique_ptr<HoldingMulti> m) {
      if (m->next == m->holding.size()) return DecideOthers(std::move(m));
      const std::size_t i = m->holding[m->next];
      const CheckItem& item = m->items[i];
      const ReserveRequest reserve{item.key, item.policy, item.cost, HoldOf(item), m->now};
      store->ReserveAsyncValidated(
          reserve, [steps = *this, m = std::move(m), i](absl::StatusOr<Reservation> held) mutable {
            if (!held.ok()) return steps.Fail(std::move(m), held.status());
            m->answer.items[i] = held->decision;
            m->answer.degraded |= held->decision.degraded;
            if (held->decision.allowed && !held->id.empty()) {
              m->answer.held.push_back(HeldReservation{i, std::move(held->id), held->expires});
            }
            if (!held->decision.allowed && !m->items[i].shadow) return steps.Peek(std::move(m));
            ++m->next;
            steps.Reserve(std::move(m));
          });
    }

    void DecideOthers(std::unique_ptr<HoldingMulti> m) {
      if (m->others.empty()) return Finish(std::move(m), /*allowed=*/true);
      std::vector<CheckItem> others;
      others.reserve(m->others.size());
      for (const std::size_t i : m->others) others.push_back(m->items[i]);
      const MultiRequest rest{others, m->now};
      store->DecideAllAsyncValidated(
          rest, [steps = *this, m = std::move(m)](absl::StatusOr<MultiDecision> decided) mutable {
            if (!decided.ok()) return steps.Fail(std::move(m), decided.status());
            for (std::size_t k = 0; k < m->others.size(); ++k) {
              m->answer.items[m->others[k]] = decided->items[k];
            }
            for (const std::size_t k : decided->unknown) m->answer.unknown.push_back(m->others[k]);
            m->answer.degraded |= decided->degraded;
            m->answer.from_denial_cache = decided->from_denial_cache;
            if (decided->allowed) return steps.Finish(std::move(m), /*allowed=*/true);
            steps.Release(std::move(m), absl::OkStatus());
          });
    }

    // A reservation was denied, so is the request: the items not decided yet report their
    // peeks (as in one step, where nothing is consumed and the others peek), and the
    // reservations made are given back.
    void Peek(std::unique_ptr<HoldingMulti> m) {
      std::vector<std::size_t> rest(m->holding.begin() + m->next + 1, m->holding.end());
      rest.insert(rest.end(), m->others.begin(), m->others.end());
      if (rest.empty()) return Release(std::move(m), absl::OkStatus());
      std::vector<CheckItem> peeks;
      peeks.reserve(rest.size());
      for (const std::size_t i : rest) {
        peeks.push_back(m->items[i]);
        peeks.back().cost = 0;
      }
      const MultiRequest request{peeks, m->now};  // before `m` moves into the callback
      store->DecideAllAsyncValidated(
          request, [steps = *this, m = std::move(m),
                    rest = std::move(rest)](absl::StatusOr<MultiDecision> peeked) mutable {
            for (std::size_t k = 0; k < rest.size(); ++k) {
              if (peeked.ok() && !absl::c_linear_search(peeked->unknown, k)) {
                m->answer.items[rest[k]] = peeked->items[k];
              } else {
                m->NotAsked(rest[k]);
              }
            }
            if (peeked.ok()) m->answer.degraded |= peeked->degraded;
            steps.Release(std::move(m), absl::OkStatus());
          });
    }

    // A store failure: the reservations made are given back, then the error answered.
    void Fail(std::unique_ptr<HoldingMulti> m, absl::Status status) {
      Release(std::move(m), std::move(status));
    }

    // The request is denied (or failed: `status`): every reservation made is released
    // (settled at 0), newest first, and each released item then reports the key's peek,
    // as a denied multi-decision's allowed items do. A release that fails leaves its
    // reservation to end with its hold (docs/leases.md): a lease frees itself then, a
    // reservation stays charged at its estimate.
    void Release(std::unique_ptr<HoldingMulti> m, absl::Status status) {
      if (m->answer.held.empty()) {
        if (!status.ok()) return m->done(std::move(status));
        return Finish(std::move(m), /*allowed=*/false);
      }
      HeldReservation held = std::move(m->answer.held.back());
      m->answer.held.pop_back();
      const SettleRequest release{held.id, 0, m->now};
      store->SettleAsyncValidated(
          release, [steps = *this, m = std::move(m), item = held.item,
                    status = std::move(status)](absl::StatusOr<Decision> peek) mutable {
            if (peek.ok()) m->answer.items[item] = *peek;
            steps.Release(std::move(m), std::move(status));
          });
    }

    void Finish(std::unique_ptr<HoldingMulti> m, bool allowed) {
      m->answer.allowed = allowed;
      std::sort(m->answer.unknown.begin(), m->answer.unknown.end());
      core::Summarize(m->items, m->answer);
      m->done(std::move(m->answer));
    }
  };
  Steps{this}.Reserve(std::make_unique<HoldingMulti>(request, std::move(done)));
}

}  // namespace floodgate
