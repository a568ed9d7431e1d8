#pragma once

// The seam between `floodgate serve` and the RLS engine: the one place that builds the
// Engine serve runs. serve_engine.cc here is a stand-in until the engine (rls-engine
// branch: config loading, matching, decisions, FromEnvironment) is merged; the merge
// replaces serve_engine.cc only.

#include <absl/status/statusor.h>
#include <floodgate/store.h>

#include <memory>

#include "server/config.h"
#include "server/rls/engine.h"

namespace floodgate::server::rls {

// The engine for `serve`: upstream's environment (RUNTIME_ROOT, SHADOW_MODE,
// LIMIT_RESPONSE_HEADERS_ENABLED...) with floodgate's `rls:` config section on top,
// deciding on `store`. Errors are bad settings or a bad initial config directory.
absl::StatusOr<std::unique_ptr<Engine>> MakeServeEngine(const server::RlsSection& section,
                                                        std::shared_ptr<Store> store);

// Whether MakeServeEngine builds the real engine (false: the stand-in, which answers
// every request as upstream answers an unknown domain: OK, no limit).
bool ServeEngineIsReal();

}  // namespace floodgate::server::rls
