// Upstream's debug endpoints: the listing, the loaded config (/rlconfig) and /stats.

#include "server/rls/debug_service.h"

#include "server/rls/config.h"

namespace floodgate::server::rls {

DebugService::DebugService(const Engine& engine, StatsText stats)
    : engine_(engine), stats_(std::move(stats)) {}

std::string DebugService::Listing() {
  // Upstream's help texts; its /debug/pprof/ endpoints are Go's profiler, not here.
  return "/rlconfig: print out the currently loaded configuration for debugging\n"
         "/stats: print out stats\n";
}

void DebugService::Handle(const Request& request, const boost::asio::ip::address& peer,
                          Respond respond) {
  (void)peer;
  const std::string_view path = PathOf(TargetOf(request));
  std::string body;
  if (path == "/rlconfig") {
    if (const auto config = engine_.CurrentConfig()) body = config->Dump();
  } else if (path == "/stats") {
    if (stats_) body = stats_();
  } else {
    body = Listing();
  }
  respond(MakeResponse(request, http::status::ok, std::move(body), "text/plain; charset=utf-8"));
}

}  // namespace floodgate::server::rls
