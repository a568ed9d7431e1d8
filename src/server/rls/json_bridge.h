#pragma once

// POST /json, as upstream's (envoyproxy/ratelimit) HTTP port offers it, on the RLS engine.
//
// A RateLimitRequest as protobuf JSON in, the RateLimitResponse out.

#include "server/http_message.h"

namespace floodgate::server::rls {

class Engine;

// Calls `respond` exactly once, inline or later on the store's thread; `engine` outlives
// the call.
void ServeJson(Engine& engine, const Request& request, Respond respond);

}  // namespace floodgate::server::rls
