// make bench, config part: loading a config of N rules beside yaml-cpp parsing the same text.
//
// docs/security.md, "Configuration files": loading grows linearly with the rules (it grew with
// their square), and the peer shows it: ParseConfig's time over YAML::Load's of the same text
// stays the same ratio from 10,000 to 60,000 rules. Also every request's cost of the rules:
// MatchAll tries each in turn.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "server/config.h"
#include "server/rls/config.h"

namespace {

// Rules as the measurement wrote them: one prefix each, /p0 ... /pN.
std::string Rules(std::int64_t n) {
  std::string yaml = "rules:\n";
  for (std::int64_t i = 0; i < n; ++i) {
    yaml += fmt::format("  - name: r{}\n    match: {{path_prefix: /p{}}}\n    policy: gcra:10/1s\n",
                        i, i);
  }
  return yaml;
}

// One domain of N descriptors.
std::string Descriptors(std::int64_t n) {
  std::string yaml = "domain: big\ndescriptors:\n";
  for (std::int64_t i = 0; i < n; ++i) {
    yaml += fmt::format(
        "  - key: k\n    value: v{}\n    rate_limit: {{unit: second, requests_per_unit: 10}}\n", i);
  }
  return yaml;
}

void BM_YamlLoadRules(benchmark::State& state) {
  const std::string yaml = Rules(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(YAML::Load(yaml));
  state.SetComplexityN(state.range(0));
}

void BM_ParseConfig(benchmark::State& state) {
  const std::string yaml = Rules(state.range(0));
  for (auto _ : state) {
    auto config = floodgate::server::ParseConfig(yaml, "bench.yaml");
    if (!config.ok()) state.SkipWithError("refused");
    benchmark::DoNotOptimize(config);
  }
  state.SetComplexityN(state.range(0));
}

void BM_YamlLoadDescriptors(benchmark::State& state) {
  const std::string yaml = Descriptors(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(YAML::Load(yaml));
  state.SetComplexityN(state.range(0));
}

void BM_ParseRlsConfig(benchmark::State& state) {
  const std::string yaml = Descriptors(state.range(0));
  for (auto _ : state) {
    auto config = floodgate::server::rls::ParseRlsConfig({{"bench.yaml", yaml}});
    if (!config.ok()) state.SkipWithError("refused");
    benchmark::DoNotOptimize(config);
  }
  state.SetComplexityN(state.range(0));
}

// A request matched against N rules, four of which match it (/p5, /p59, /p599, /p5999).
void BM_MatchAll(benchmark::State& state) {
  const auto config = floodgate::server::ParseConfig(Rules(state.range(0)), "bench.yaml");
  if (!config.ok()) return state.SkipWithError("refused");
  for (auto _ : state) benchmark::DoNotOptimize(config->MatchAll("GET", "/p5999/x"));
  state.SetComplexityN(state.range(0));
}

}  // namespace

#define SIZES Arg(10'000)->Arg(30'000)->Arg(60'000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_YamlLoadRules)->SIZES->Complexity(benchmark::oN);
BENCHMARK(BM_ParseConfig)->SIZES->Complexity(benchmark::oN);
BENCHMARK(BM_YamlLoadDescriptors)->SIZES->Complexity(benchmark::oN);
BENCHMARK(BM_ParseRlsConfig)->SIZES->Complexity(benchmark::oN);
BENCHMARK(BM_MatchAll)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
