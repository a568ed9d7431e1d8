// RedisStore's own counters in the Prometheus text format, for the service's /metrics.

#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include "store/redis/cluster_router.h"
#include "store/redis/sentinel.h"

namespace floodgate {

void RedisStore::AppendMetrics(std::string& out) const {
  const RedisStats r = redis_stats();
  out += fmt::format(
      "# HELP floodgate_store_errors_total Decisions the store failed (on_error answered).\n"
      "# TYPE floodgate_store_errors_total counter\nfloodgate_store_errors_total {}\n"
      "# HELP floodgate_store_timeouts_total Decisions that exceeded the store timeout.\n"
      "# TYPE floodgate_store_timeouts_total counter\nfloodgate_store_timeouts_total {}\n"
      "# HELP floodgate_store_backlog_timeouts_total Of those, decisions that waited behind "
      "this process's own queue while the store kept answering (not counted by the breaker).\n"
      "# TYPE floodgate_store_backlog_timeouts_total counter\n"
      "floodgate_store_backlog_timeouts_total {}\n"
      "# HELP floodgate_breaker_open 1 while the circuit breaker stops calls to the store.\n"
      "# TYPE floodgate_breaker_open gauge\nfloodgate_breaker_open {}\n"
      "# HELP floodgate_denial_cache_hits_total Denials answered without a store call.\n"
      "# TYPE floodgate_denial_cache_hits_total counter\nfloodgate_denial_cache_hits_total {}\n"
      "# HELP floodgate_store_calls_total Script calls sent to the store.\n"
      "# TYPE floodgate_store_calls_total counter\nfloodgate_store_calls_total {}\n"
      "# HELP floodgate_store_reconnects_total Connections to the store lost and redone.\n"
      "# TYPE floodgate_store_reconnects_total counter\nfloodgate_store_reconnects_total {}\n",
      r.errors, r.timeouts, r.backlog_timeouts, r.breaker_open ? 1 : 0, r.denial_cache_hits,
      r.calls, r.reconnects);
  out += fmt::format(
      "# HELP floodgate_multi_decisions_total Decisions over several limits at once.\n"
      "# TYPE floodgate_multi_decisions_total counter\nfloodgate_multi_decisions_total {}\n"
      "# HELP floodgate_multi_releases_total Reservations on a Redis Cluster slot given back "
      "because a later slot denied (failed: their call failed; the capacity returns when the "
      "key expires).\n"
      "# TYPE floodgate_multi_releases_total counter\n"
      "floodgate_multi_releases_total{{result=\"sent\"}} {}\n"
      "floodgate_multi_releases_total{{result=\"failed\"}} {}\n",
      r.multi_decisions, r.releases, r.release_failures);
  out += fmt::format(
      "# HELP floodgate_prefetch_leases_total Leases of units taken from the shared limit "
      "(prefetch).\n"
      "# TYPE floodgate_prefetch_leases_total counter\nfloodgate_prefetch_leases_total {}\n"
      "# HELP floodgate_prefetch_units_total Units leased, and unused units returned.\n"
      "# TYPE floodgate_prefetch_units_total counter\n"
      "floodgate_prefetch_units_total{{event=\"leased\"}} {}\n"
      "floodgate_prefetch_units_total{{event=\"returned\"}} {}\n"
      "# HELP floodgate_prefetch_local_decisions_total Decisions answered from a leased "
      "budget, without a store call.\n"
      "# TYPE floodgate_prefetch_local_decisions_total counter\n"
      "floodgate_prefetch_local_decisions_total {}\n"
      "# HELP floodgate_prefetch_budgets Budgets (key and policy) held in process.\n"
      "# TYPE floodgate_prefetch_budgets gauge\nfloodgate_prefetch_budgets {}\n",
      r.prefetch_leases, r.prefetch_units_leased, r.prefetch_units_returned,
      r.prefetch_local_decisions, r.prefetch_budgets);
  if (r.replicas_online >= 0) {
    out += fmt::format(
        "# HELP floodgate_redis_replicas_online Replicas the primary last said were online "
        "(wait_replicas: ready only with enough).\n"
        "# TYPE floodgate_redis_replicas_online gauge\nfloodgate_redis_replicas_online {}\n",
        r.replicas_online);
  }
  AppendTopologyMetrics(r, out);
}

}  // namespace floodgate

namespace floodgate::redis {

void ClusterTopology::AppendMetrics(const RedisStats& r, std::string& out) const {
  out += fmt::format(
      "# HELP floodgate_redis_redirects_total Redis Cluster redirects followed.\n"
      "# TYPE floodgate_redis_redirects_total counter\n"
      "floodgate_redis_redirects_total{{kind=\"moved\"}} {}\n"
      "floodgate_redis_redirects_total{{kind=\"ask\"}} {}\n"
      "# HELP floodgate_redis_retries_total Calls retried after TRYAGAIN or CLUSTERDOWN.\n"
      "# TYPE floodgate_redis_retries_total counter\nfloodgate_redis_retries_total {}\n"
      "# HELP floodgate_redis_topology_refreshes_total CLUSTER SLOTS asked.\n"
      "# TYPE floodgate_redis_topology_refreshes_total counter\n"
      "floodgate_redis_topology_refreshes_total {}\n"
      "# HELP floodgate_redis_cluster_primaries Primaries in the current slot map.\n"
      "# TYPE floodgate_redis_cluster_primaries gauge\nfloodgate_redis_cluster_primaries {}\n"
      "# HELP floodgate_redis_node_batches_total Script calls over keys of several slots of "
      "one primary (retried: refused for a key it no longer serves, then sent slot by slot).\n"
      "# TYPE floodgate_redis_node_batches_total counter\n"
      "floodgate_redis_node_batches_total{{result=\"sent\"}} {}\n"
      "floodgate_redis_node_batches_total{{result=\"retried\"}} {}\n"
      "# HELP floodgate_redis_node_batch_refusals_total Connection set-ups whose primary "
      "refused the node batch script (Redis < 7.0): they batch within one slot.\n"
      "# TYPE floodgate_redis_node_batch_refusals_total counter\n"
      "floodgate_redis_node_batch_refusals_total {}\n",
      r.moved, r.asked, r.retried, r.topology_refreshes, r.nodes, r.node_batches,
      r.node_batch_retries, r.node_batch_refusals);
}

void SentinelTopology::AppendMetrics(const RedisStats& r, std::string& out) const {
  out += fmt::format(
      "# HELP floodgate_redis_primary_switches_total Redis Sentinel failovers followed.\n"
      "# TYPE floodgate_redis_primary_switches_total counter\n"
      "floodgate_redis_primary_switches_total {}\n"
      "# HELP floodgate_redis_early_switches_total Of those, the moves made when the "
      "leading sentinel announced the promotion (+failover-state-send-slaveof-noone), "
      "before +switch-master.\n"
      "# TYPE floodgate_redis_early_switches_total counter\n"
      "floodgate_redis_early_switches_total {}\n",
      r.primary_switches, r.early_switches);
}

}  // namespace floodgate::redis
