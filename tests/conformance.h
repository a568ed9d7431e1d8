#pragma once

// The conformance vectors of tests/vectors, run through the Store interface on any store.
//
// Written from docs/algorithms.md, so that every store is held to the same answers.

#include <floodgate/store.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace floodgate::testing {

struct VectorStep {
  std::int64_t t;
  std::string key;
  std::int64_t cost;
  Decision expect;
  // An operation on the key (tests/vectors/operate_*.json) instead of a decision: `expect`
  // is the peek it answers.
  std::optional<KeyOperation> op;
  std::int64_t units = 0;
};

struct VectorCase {
  std::string file;
  std::string name;
  std::string why;
  std::string policy;
  std::vector<VectorStep> steps;
  // Whether a step operates on a key. Such a case runs step by step only (RunCase): an
  // operation is a call of its own (lua/operate.lua), never in a batch.
  bool operates = false;
};

// Every case of every file in tests/vectors.
std::vector<VectorCase> LoadAllVectors();

// tests/vectors/multi: multi-decisions (docs/multi.md).
struct MultiItem {
  std::string name;
  std::string key;
  std::string policy;
  std::int64_t cost = 1;
  bool shadow = false;
  std::int64_t hold_us = 0;  // > 0: the item reserves its cost for that long
};
struct MultiStep {
  std::int64_t t;
  std::vector<MultiItem> items;
  bool allowed;
  std::size_t binding;
  std::int64_t retry_after_us;
  std::int64_t delay_us = 0;  // MultiDecision::delay (delay.json; 0 elsewhere)
  std::vector<std::string> denied_by, would_deny;
  std::vector<Decision> decisions;
  // leases.json: what the step holds, item name -> the name it is held as; or, when
  // `settle` is set, the step settles what was held under that name at `actual` (0: a
  // lease's release) and `decisions` holds its answer.
  std::map<std::string, std::string> held;
  std::string settle;
  std::int64_t actual = 0;
};
struct MultiCase {
  std::string file;  // multi.json, leases.json or delay.json
  std::string name;
  std::string why;
  std::vector<MultiStep> steps;
  // Whether a step holds (a lease, a reservation) or settles. Such a case runs step by
  // step only: a store that holds in steps (docs/leases.md) answers in-flight requests
  // as some interleaving of those steps, which the vectors do not fix.
  bool holds = false;
};
std::vector<MultiCase> LoadMultiVectors();

// Runs one multi case on `store`, each key written `<key_prefix><key>` (a prefix holding a
// {hash tag} puts every item of the case on one Redis Cluster slot), step by step or,
// `in_flight` (cases that hold nothing only), every step submitted before any answer is
// read.
void RunMultiCase(Store& store, const MultiCase& c, const std::string& key_prefix,
                  bool in_flight = false);
// The status of the case's first step alone (a case a store refuses: delay.json across
// Cluster slots).
absl::Status FirstMultiStepStatus(Store& store, const MultiCase& c, const std::string& key_prefix);

// tests/vectors/reserve: reservations (docs/reservations.md).
struct ReserveStep {
  std::int64_t t;
  std::string op;  // "check", "reserve", "settle", "acquire", "release" or "take"
  std::string key;
  std::int64_t amount;  // check: cost; reserve: estimate; settle: actual
  // reserve, acquire: the name it is held as; settle, release: the one settled / released
  std::string reservation;
  std::int64_t hold_us;            // reserve; 0: the default hold
  std::optional<Decision> expect;  // unset when the step must fail
  std::string expect_error;        // "not_found" or "invalid_argument"
  // take (amount: up_to): its lifetime, and the units and lease length (expires - t) it
  // must answer (take.json).
  std::int64_t lifetime_us = 0;
  std::int64_t expect_units = 0;
  std::int64_t expect_lease_us = 0;
};
struct ReserveCase {
  std::string file;  // reserve.json, leases.json or take.json
  std::string name;
  std::string why;
  std::string policy;
  std::vector<ReserveStep> steps;
};
std::vector<ReserveCase> LoadReserveVectors();

// Runs one reservation case on `store`, keys prefixed with `key_prefix`.
void RunReserveCase(Store& store, const ReserveCase& c, const std::string& key_prefix);

// Ids a store did not make, each written from one it did (upper-cased whole or one letter,
// signed, spaced, cut, lengthened): a settle of each is NotFound on every store, and the
// true id then settles once. Keys prefixed with `key_prefix`.
void ExpectOnlyItsOwnIdsSettle(Store& store, const std::string& key_prefix);

// How a case's decisions carry their policy: in each DecideRequest, or as one
// PreparedPolicy (Store::Decide(key, PreparedPolicy, ...)), which must answer the same.
enum class PolicyForm { kInRequest, kPrepared };

// Runs one case on `store`, each key prefixed with `key_prefix` (a store shared by many
// cases gives each its own prefix, since every case starts from an empty store).
// Records a gtest failure, naming the step, for every field that differs.
void RunCase(Store& store, const VectorCase& c, const std::string& key_prefix,
             PolicyForm form = PolicyForm::kInRequest);

// The same, with every step submitted at once (DecideAsync) before any answer is read:
// an asynchronous store batches them, and each decision must still see the ones before.
// Cases that operate on keys are left out (VectorCase::operates), here and below.
void RunCaseInFlight(Store& store, const VectorCase& c, const std::string& key_prefix);

// What a test does around submitting decisions in flight: `hold` before the first,
// `release` after the last (empty: nothing). A Redis test holds Redis's script calls
// (PausedWrites) so that what is in flight queues and goes in batch calls whatever the
// machine's speed, instead of as many as the scheduler happens to gather.
struct InFlightHooks {
  std::function<void()> hold;
  std::function<void()> release;
};

// Every step of every case submitted at once, case c's keys under `<key_prefix><c>:`,
// between the hooks; then every answer judged as RunCaseInFlight does. Returns how many
// decisions were submitted.
std::size_t RunCasesInFlight(Store& store, const std::vector<VectorCase>& cases,
                             const std::string& key_prefix, const InFlightHooks& hooks = {});

// 8 threads with 64 decisions each in flight hammer one key per policy (every
// algorithm): exactly the policy's capacity is admitted, and nothing fails.
void ExpectExactCapacityUnderContention(Store& store);

// 4 threads with 16 multi-decisions each in flight on a rate limit and a concurrency
// limit (docs/leases.md, "In a multi-decision"): exactly the tighter one's capacity is
// admitted, with one lease each, and the denied requests leave nothing behind: neither
// rate spent nor a lease held.
void ExpectExactLeasesUnderContention(Store& store, const std::string& key_prefix);

// gcra in whole µs (docs/algorithms.md, revision 2): for a table of policies whose limit does
// not divide the period (and some that do), B + 1 cost-1 requests at one instant, all in
// flight at once (every policy's, between the hooks), admit exactly B, and the one after
// waits exactly E = ceil(P / L). Returns how many decisions were submitted.
std::size_t ExpectSameInstantGcraBurstsAdmitExactlyB(Store& store, const std::string& key_prefix,
                                                     const InFlightHooks& hooks = {});

}  // namespace floodgate::testing
