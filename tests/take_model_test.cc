// Model check of take(k, δ) on memory://: random leases spent at random times stay within the
// envelope.
//
// tests/take_model.h says what is drawn and what is checked; docs/prefetch.md why it holds.
#include "take_model.h"

#include <floodgate/memory_store.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "trials.h"

namespace floodgate::take_model {
namespace {

// A fixed number of trials, not as many as fit in some seconds: a seed checks the same
// trials on every machine, and a run's verdict depends on the seed alone.
constexpr int kTrialsPerKind = ::floodgate::testing::Trials(1500);

class TakeModel : public ::testing::TestWithParam<Kind> {};

TEST_P(TakeModel, SpendingInsideLeasesStaysWithinTheEnvelope) {
  const std::uint64_t seed = ModelSeed();
  std::cout << "take model check " << GetParam().name << ": seed " << seed
            << " (FG_TAKE_MODEL_SEED=" << seed << " replays it)\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  MemoryStoreOptions options;
  options.shards = 1;
  MemoryStore store(std::move(options));
  int trials = 0;
  std::int64_t leased = 0;
  for (; trials < kTrialsPerKind; ++trials) {
    const Policy policy = RandomPolicy(rng, GetParam().algorithm, GetParam().refill);
    const Trial trial = Simulate(rng, store, fmt::format("key{}", trials), policy);
    for (const auto& [t, n] : trial.spent) leased += n;
    const std::string violation = Violation(policy, trial.spent);
    if (!violation.empty()) FAIL() << Report(seed, trials, policy, violation, trial);
    if (HasFailure()) return;
  }
  std::cout << "  " << trials << " trials, " << leased << " units spent\n";
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, TakeModel, ::testing::ValuesIn(Kinds()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace floodgate::take_model
