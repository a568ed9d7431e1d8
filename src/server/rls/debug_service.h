#pragma once

// Upstream's debug port (DEBUG_HOST:DEBUG_PORT): the `/` listing, `/rlconfig`, `/stats`.
//
// docs/envoy.md, "The debug port". As upstream's http.ServeMux: every path but the two is the
// listing, any method.

#include <functional>
#include <string>

#include "server/http_message.h"
#include "server/rls/engine.h"

namespace floodgate::server::rls {

// The body of `/stats`: upstream prints its process variables there; the stats area fills it.
using StatsText = std::function<std::string()>;

class DebugService final : public HttpHandler {
 public:
  // `engine` outlives the service; `stats` may be empty (then `/stats` is empty).
  DebugService(const Engine& engine, StatsText stats);

  void Handle(const Request& request, const boost::asio::ip::address& peer,
              Respond respond) override;

  // The `/` listing, "PATH: HELP\n" sorted by path, as upstream writes it.
  static std::string Listing();

 private:
  const Engine& engine_;
  StatsText stats_;
};

}  // namespace floodgate::server::rls
