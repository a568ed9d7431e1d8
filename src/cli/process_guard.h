#pragma once

// What a serving process (serve, ratelimit) sets up for itself: its file descriptor limit, and
// a watchdog that ends a shutdown stuck past its grace.

#include <chrono>
#include <thread>

namespace floodgate::cli {

// One descriptor per connection: a soft limit of 1,024 (systemd's default) runs out long before
// the machine does, and gRPC (Debian's 1.51) stops accepting for good after one accept fails for
// want of a descriptor. Raised to the hard limit, as Go's runtime does; the HTTP server backs off
// when even that runs out. Logs when it cannot.
void RaiseDescriptorLimit();

// Past a shutdown's grace, what still runs is stuck (a thread blocked where no timeout reaches
// it): the process exits anyway, this much later, rather than never.
inline constexpr std::chrono::seconds kStuckAfterGrace{2};

// A watchdog for a shutdown that has begun: unless the returned thread is destroyed (or
// stopped) first, the process logs and exits with `exit_code` once `limit` has passed. Every
// wait of a shutdown is bounded, but a thread blocked in a call that never returns would keep
// joins waiting for good (tz=/dev/stdin once did; SIGTERM then no longer stopped serve).
// Declared before what it watches, it watches their destructors too.
std::jthread ExitUnlessStoppedWithin(std::chrono::seconds limit, int exit_code);

}  // namespace floodgate::cli
