#pragma once

// Upstream's stats sinks on the wire: statsd (gostats' net sink), DogStatsD (datadog-go), and
// gostats' logging sink.
//
// docs/envoy.md, "Stats". Each buffers what a flush hands it and sends it at the flush's end:
// statsd lines `name:value|c`, `|g`, `|ms` over TCP (gostats' default) or UDP (datagrams of at
// most 1432 bytes of whole lines, as gostats); DogStatsD over UDP with the tags gostats serialized
// into the name as `|#key:value`; the logging sink's JSON lines on stderr.

#include <absl/status/statusor.h>

#include <cstdio>
#include <memory>

#include "server/rls/upstream_stats.h"

namespace floodgate::server::rls {

// The sink `settings` ask for, but Prometheus (prometheus_sink.h). kStatsd and kDogStatsd
// resolve the host now; an error names what failed. kNone: nullptr.
absl::StatusOr<std::unique_ptr<StatsSink>> MakeNetworkSink(const StatsSettings& settings);

// gostats' logging sink, writing to `out` (stderr in `ratelimit`); `now_seconds` gives the
// lines' `ts` (the wall clock's seconds, fractional).
std::unique_ptr<StatsSink> MakeLoggingSink(std::FILE* out, std::function<double()> now_seconds);

// DogStatsD's line for a gostats name (tags split off, mogrified), for tests and the sink.
std::string DogStatsdLine(std::string_view name, std::string_view value_and_type,
                          const StatsSettings& settings);

}  // namespace floodgate::server::rls
