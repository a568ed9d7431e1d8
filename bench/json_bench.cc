// make bench, JSON part: parsing a /v1/check body next to the decision it precedes.
//
// Is JSON parsing a meaningful part of a /v1/check? The body parse (simdjson, as the service does
// it) and the memory-store decision are measured in the same run.
#include <benchmark/benchmark.h>
#include <floodgate/memory_store.h>
#include <simdjson.h>

#include <string>

namespace {

const std::string kBody = R"({"key":"user:123456","policy":"gcra:100/1m,burst=20","cost":1})";

void BM_ParseCheckBody(benchmark::State& state) {
  simdjson::dom::parser parser;
  for (auto _ : state) {
    simdjson::dom::element doc;
    if (parser.parse(kBody).get(doc) != simdjson::SUCCESS) state.SkipWithError("parse");
    std::string_view key, policy;
    std::int64_t cost = 0;
    for (const auto [name, value] : doc.get_object()) {
      bool ok = true;
      if (name == "key") ok = value.get_string().get(key) == simdjson::SUCCESS;
      if (name == "policy") ok = value.get_string().get(policy) == simdjson::SUCCESS;
      if (name == "cost") ok = value.get_int64().get(cost) == simdjson::SUCCESS;
      if (!ok) state.SkipWithError("field");
    }
    benchmark::DoNotOptimize(key.size() + policy.size() + cost);
  }
}
BENCHMARK(BM_ParseCheckBody);

void BM_ParsePolicy(benchmark::State& state) {
  for (auto _ : state) {
    auto policy = floodgate::Policy::Parse("gcra:100/1m,burst=20");
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(BM_ParsePolicy);

void BM_MemoryDecision(benchmark::State& state) {
  floodgate::MemoryStore store;
  const auto policy = *floodgate::Policy::Parse("gcra:100/1m,burst=20");
  std::uint64_t i = 0;
  std::string key = "user:000000";
  for (auto _ : state) {
    key[5] = static_cast<char>('0' + (i++ % 10));  // a handful of hot keys
    benchmark::DoNotOptimize(store.Decide({key, policy, 1, std::nullopt}));
  }
}
BENCHMARK(BM_MemoryDecision);

}  // namespace

BENCHMARK_MAIN();
