// How many random trials a model check draws: the full count in the optimised tree, a fifth
// under a sanitizer (FLOODGATE_SANITIZED, tests/CMakeLists.txt). A sanitizer looks for
// memory and thread errors in the code the trials run, which the first trials already run;
// the many more trials of the optimised tree are there to find a rare violation of the
// model, and a sanitizer run is 5-20x slower at that (take model under ASan: 44 s).
#pragma once

namespace floodgate::testing {

constexpr int Trials(int full_count) {
#if defined(FLOODGATE_SANITIZED)
  return full_count / 5;
#else
  return full_count;
#endif
}

}  // namespace floodgate::testing
