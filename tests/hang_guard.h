#pragma once

// How long a test waits for an event before it calls the wait a hang.

#include <chrono>

namespace floodgate::testing {

// The events tests wait for (a server up, a failover, a reconnect, a count reached, a log
// line) take milliseconds to a few seconds even on a loaded machine, and every wait ends
// as soon as its event happens: this bound only ends a test that would otherwise never
// end. It never decides how fast something must be; timing claims belong to bench/
// (issue 34). ctest's TIMEOUT (900 s a shard) is the outer guard.
inline constexpr std::chrono::seconds kHangGuard{60};

}  // namespace floodgate::testing
