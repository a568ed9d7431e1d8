#pragma once

// The seam between `floodgate serve` and the RLS engine: the one place that builds it.

#include <absl/status/statusor.h>
#include <floodgate/store.h>

#include <absl/functional/any_invocable.h>

#include <memory>

#include "server/config.h"
#include "server/rls/engine.h"
#include "server/rls/xds_client.h"

namespace floodgate::server::rls {

// The settings `serve` runs the engine with: upstream's environment (RUNTIME_ROOT,
// SHADOW_MODE, LIMIT_RESPONSE_HEADERS_ENABLED...) with floodgate's `rls:` config section on
// top. Errors are bad environment values.
absl::StatusOr<RlsSettings> ServeSettings(const server::RlsSection& section);

// The engine for `serve`: upstream's environment (RUNTIME_ROOT, SHADOW_MODE,
// LIMIT_RESPONSE_HEADERS_ENABLED...) with floodgate's `rls:` config section on top,
// deciding on `store`. Errors are bad settings or a bad initial config directory.
absl::StatusOr<std::unique_ptr<Engine>> MakeServeEngine(const server::RlsSection& section,
                                                        std::shared_ptr<Store> store);

// The engine on `settings` as they are (the `ratelimit` command's, from upstream_mode.h): the
// config directory loaded once (a bad one is an error) and watched, decisions on `store`, and
// upstream's counters of SECOND limits on `per_second` when given (REDIS_PERSECOND).
absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(RlsSettings settings,
                                                   std::shared_ptr<Store> store,
                                                   std::shared_ptr<Store> per_second = nullptr);

// The engine on `settings` whose config comes from an xDS server (CONFIG_TYPE=GRPC_XDS_SOTW,
// xds_client.h): none until the first good response, then each good one; a bad one keeps the
// last (counted as a load error). `on_update` is called after each response is handled
// (good or bad), on the client's thread: `ratelimit` waits for the first before it opens
// its ports, as upstream's NewService does. `per_second` as MakeEngine's.
absl::StatusOr<std::unique_ptr<Engine>> MakeXdsEngine(RlsSettings settings,
                                                      std::shared_ptr<Store> store,
                                                      XdsSettings xds, XdsTlsFiles tls,
                                                      absl::AnyInvocable<void()> on_update,
                                                      std::shared_ptr<Store> per_second = nullptr);

}  // namespace floodgate::server::rls
