// The conformance vectors on memory://, one store per case and one shared by all cases.
//
// The shared store uses key prefixes, as the Redis stores will run them.
#include "conformance.h"

#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

namespace floodgate::testing {
namespace {

class MemoryConformance : public ::testing::TestWithParam<VectorCase> {};

TEST_P(MemoryConformance, FreshStore) {
  MemoryStore store;
  RunCase(store, GetParam(), "");
}

TEST(MemoryConformanceShared, AllCasesInOneStoreWithPrefixes) {
  MemoryStore store;
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);  // every file loaded
  for (std::size_t i = 0; i < cases.size(); ++i) RunCase(store, cases[i], fmt::format("c{}:", i));
}

// Store::Decide under a PreparedPolicy (MemoryStore::DecidePreparedValidated, its own path
// into the shards) answers every vector as a DecideRequest does.
TEST(MemoryConformanceShared, AllCasesThroughPreparedPolicies) {
  MemoryStore store;
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    RunCase(store, cases[i], fmt::format("c{}:", i), PolicyForm::kPrepared);
  }
}

TEST(MemoryGcra, SameInstantBurstsAdmitExactlyB) {
  MemoryStore store;
  ExpectSameInstantGcraBurstsAdmitExactlyB(store, "");
}

TEST(MemoryLeases, ExactInAMultiDecisionUnderContention) {
  MemoryStore store;
  ExpectExactLeasesUnderContention(store, "");
  EXPECT_EQ(store.Stats().reservations, 30u + 20u) << "a lease per admitted request, no more";
}

class MemoryMulti : public ::testing::TestWithParam<MultiCase> {};

TEST_P(MemoryMulti, Vectors) {
  MemoryStore store;
  RunMultiCase(store, GetParam(), "");
}

INSTANTIATE_TEST_SUITE_P(Vectors, MemoryMulti, ::testing::ValuesIn(LoadMultiVectors()),
                         [](const ::testing::TestParamInfo<MultiCase>& info) {
                           return "multi_" + std::to_string(info.index);
                         });

class MemoryReserve : public ::testing::TestWithParam<ReserveCase> {};

TEST_P(MemoryReserve, Vectors) {
  MemoryStore store;
  RunReserveCase(store, GetParam(), "");
}

TEST(MemoryReserveShared, AllCasesInOneStoreWithPrefixes) {
  MemoryStore store;
  const auto cases = LoadReserveVectors();
  ASSERT_GE(cases.size(), 14u);  // the file loaded
  for (std::size_t i = 0; i < cases.size(); ++i) {
    RunReserveCase(store, cases[i], fmt::format("c{}:", i));
  }
}

INSTANTIATE_TEST_SUITE_P(Vectors, MemoryReserve, ::testing::ValuesIn(LoadReserveVectors()),
                         [](const ::testing::TestParamInfo<ReserveCase>& info) {
                           return "reserve_" + std::to_string(info.index);
                         });

std::string CaseName(const ::testing::TestParamInfo<VectorCase>& info) {
  std::string name =
      info.param.file.substr(0, info.param.file.find('.')) + "_" + std::to_string(info.index);
  return name;
}

INSTANTIATE_TEST_SUITE_P(Vectors, MemoryConformance, ::testing::ValuesIn(LoadAllVectors()),
                         CaseName);

}  // namespace
}  // namespace floodgate::testing
