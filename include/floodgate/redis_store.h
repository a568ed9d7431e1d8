#pragma once

// The Redis store (redis://, rediss://, redis+unix://, redis-cluster://, redis-sentinel://).

#include <floodgate/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace floodgate {

namespace redis {
struct StoreTesting;
}  // namespace redis
namespace prefetch {
class Budgets;
}  // namespace prefetch

// What a store answers when Redis fails or exceeds its timeout (docs/service.md, "Failure
// modes"). Every such answer carries degraded = true.
enum class OnError : std::uint8_t {
  kFailOpen,    // allow
  kFailClosed,  // deny
  kLocal,       // decide with an in-process memory store under the same policy
};

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  bool operator==(const RedisEndpoint&) const = default;
};

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Redis Cluster: the seeds the topology is discovered from (host/port above are the
  // first of them). Every decision goes to the primary owning its key's slot.
  bool cluster = false;
  std::vector<RedisEndpoint> seeds;
  // A unix-domain socket (redis+unix:///path), instead of host and port: one server,
  // never a cluster, never TLS (Redis serves TLS on TCP only). Empty: TCP.
  std::string unix_socket;
  // Redis Sentinel (redis-sentinel://): `seeds` are the sentinels, asked in turn for the
  // primary of `sentinel_master`; decisions go to whichever server they name and ROLE
  // confirms, and follow it through failovers (docs/stores.md, "Redis Sentinel").
  bool sentinel = false;
  std::string sentinel_master;
  std::string sentinel_user;      // the sentinels' own ACL user, if they have one
  std::string sentinel_password;  // the sentinels' requirepass (not the primary's)
  // Durability: after each script call, WAIT for this many replicas to acknowledge it
  // (within the timeout) before answering; a call they do not acknowledge is answered by
  // on_error. 0: answer at once (a failover may lose the last decisions).
  int wait_replicas = 0;
  std::string user;      // ACL user; empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;
  // TLS (rediss://, or tls=1): the server's certificate is verified against `tls_ca`
  // (a PEM file) or else the system trust store (which honours SSL_CERT_FILE), and must
  // name the host. A client certificate is sent when `tls_cert` and `tls_key` are given.
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // The name the server's certificate must carry (and SNI), instead of the host dialled:
  // cluster primaries are dialled by the address they announce, usually an IP.
  std::string tls_server_name;
  std::string prefix = "fg:";  // store keys are <prefix><algorithm-tag>:<key>
  // No decision waits longer than this for Redis (then on_error answers).
  std::chrono::microseconds timeout = std::chrono::milliseconds(50);
  std::chrono::microseconds connect_timeout = std::chrono::milliseconds(1000);
  // Open without Redis: when no server answers at Open (or no cluster seed does), the
  // store opens anyway, answers every decision by on_error (degraded) and keeps
  // connecting in the background with the reconnect backoff; decisions go to Redis as
  // soon as it answers. Off, Open fails with the reason: what a command-line user wants.
  // `floodgate serve` turns it on (a limiter that will not start without Redis takes the
  // API down with it when both restart together).
  bool lazy_connect = false;
  OnError on_error = OnError::kLocal;
  // Connections per server, each auto-pipelined; decisions spread round-robin. 0: the
  // default, 2 to one server (standalone, or Sentinel's primary) and 1 to each Cluster
  // primary, whose decisions then share a connection's batches instead of two half-full
  // ones (bench/cluster_bench.py, quiet machine: Redis CPU per decision 12.6 -> 10.0 µs,
  // 100k -> 119k decisions/s).
  int connections = 0;
  int connections_per_server() const { return connections > 0 ? connections : cluster ? 1 : 2; }
  // Decisions queued on one connection go out as one script call of at most this many
  // (1 turns batching off: one EVALSHA per decision).
  int max_batch = 64;
  // Remember denials with retry_after >= this in process, and answer repeats without a
  // round trip until they lapse; 0 turns the cache off.
  std::chrono::microseconds denial_cache_min = std::chrono::milliseconds(10);
  std::size_t denial_cache_size = 100'000;
  // Circuit breaker: after this many consecutive failures, stop sending for a while.
  int breaker_failures = 5;
  std::chrono::microseconds breaker_open = std::chrono::milliseconds(250);
  // Reconnect backoff doubles from min to max.
  std::chrono::microseconds reconnect_min = std::chrono::milliseconds(10);
  std::chrono::microseconds reconnect_max = std::chrono::milliseconds(500);

  // redis://[user:password@]host:port[/db][?timeout=50ms&on_error=local&connections=2
  //   &batch=64&prefix=fg:&connect_timeout=1s&denial_cache=10ms&lazy_connect=1]
  // redis-cluster://[user:password@]host:port[,host:port...][?the same options]
  // rediss://... (TLS), or tls=1; with ca=FILE, cert=FILE, key=FILE, sni=NAME
  // redis+unix://[user:password@]/path/to/redis.sock[?db=N&the same options, no TLS]
  // redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N&sentinel_user=U
  //   &sentinel_password=P&the same options] (rediss-sentinel://: TLS to all of them)
  // Every form also takes wait_replicas=N.
  static absl::StatusOr<RedisStoreOptions> FromUrl(std::string_view url);
  // The URL with the password masked, for logs.
  std::string Describe() const;
};

// Counters a running Redis store keeps (beyond StoreStats), for metrics and tests.
struct RedisStats {
  std::uint64_t calls = 0;              // script calls sent
  std::uint64_t batched_decisions = 0;  // decisions that went in a multi-decision call
  std::uint64_t errors = 0;             // decisions that failed on Redis (then on_error)
  std::string last_error;               // the last of those failures' message ("": none)
  std::uint64_t timeouts = 0;
  // Of those, the ones that waited behind this process's own queue while Redis kept
  // answering (too much asked at once, not a Redis failure): the breaker ignores them.
  std::uint64_t backlog_timeouts = 0;
  std::uint64_t degraded = 0;  // answers given by on_error
  std::uint64_t denial_cache_hits = 0;
  std::uint64_t noscript_reloads = 0;
  std::uint64_t reconnects = 0;
  bool breaker_open = false;  // on any node
  // Redis Cluster only.
  std::uint64_t moved = 0;               // MOVED redirects followed (the slot map was stale)
  std::uint64_t asked = 0;               // ASK redirects followed (a slot being migrated)
  std::uint64_t retried = 0;             // TRYAGAIN / CLUSTERDOWN answers retried
  std::uint64_t topology_refreshes = 0;  // CLUSTER SLOTS asked
  std::size_t nodes = 0;                 // primaries in the current slot map
  // Redis Sentinel only: moves to a new primary (a failover followed), and of those the
  // moves made when the leader announced the promotion, before +switch-master.
  std::uint64_t primary_switches = 0;
  std::uint64_t early_switches = 0;
  // wait_replicas=N on one server or Sentinel's primary: the replicas it last said were
  // online (its INFO replication, asked every second); -1 when not watched or not known yet.
  int replicas_online = -1;
  // Calls over keys of several slots of one primary, and those of them refused for a key
  // the primary no longer serves (nothing written), whose decisions went again by slot.
  std::uint64_t node_batches = 0;
  std::uint64_t node_batch_retries = 0;
  // Connection set-ups whose primary refused the node batch script (Redis < 7.0 has no
  // script flags): that connection batches within one slot.
  std::uint64_t node_batch_refusals = 0;
  // Multi-decisions (docs/multi.md).
  std::uint64_t multi_decisions = 0;
  std::uint64_t cross_slot = 0;        // Redis Cluster: across several slots
  std::uint64_t releases = 0;          // reservations given back after a later slot denied
  std::uint64_t release_failures = 0;  // releases whose call failed (capacity held to its TTL)
  // Prefetch (docs/prefetch_client.md, "Metrics").
  std::uint64_t prefetch_leases = 0;           // takes that leased units
  std::uint64_t prefetch_units_leased = 0;     // units those takes charged
  std::uint64_t prefetch_units_returned = 0;   // unused units settled back
  std::uint64_t prefetch_local_decisions = 0;  // answered in process, without a Redis call
  std::uint64_t prefetch_budgets = 0;          // (key, policy) budgets held now
};

// A store on one Redis server, on the primary Redis Sentinel names (followed through
// failovers), or on a Redis Cluster (decisions routed by key slot to the owning
// primary, redirects followed). Every decision is one atomic Lua script run
// on the server's clock (or an explicit `now`); concurrent decisions are pipelined and
// batched (on a cluster, only decisions whose keys share a slot share a call). A policy
// with prefetch is decided from units leased per key and spent in process
// (docs/prefetch_client.md). Thread-safe.
class RedisStore final : public Store {
 public:
  // Connects and loads the scripts; a wrong password or an unreachable server is an
  // error naming the address and the cause (with lazy_connect, only bad TLS files are:
  // the rest is retried in the background, and Health() tells why it has not connected).
  static absl::StatusOr<std::unique_ptr<RedisStore>> Open(RedisStoreOptions options);
  ~RedisStore() override;

  // The keys held in process: those of the local fallback limiter (on_error=local).
  // Redis's own keys live, and expire, in Redis.
  StoreStats Stats() const override;
  std::string Describe() const override;
  void Close() override;
  RedisStats redis_stats() const;
  // redis_stats() for /metrics (defined in redis_metrics.cc).
  void AppendMetrics(std::string& out) const override;
  const RedisStoreOptions& options() const;
  // PING round trip within the timeout: what /readyz asks.
  bool Ping() override;
  // OK while the store has Redis (standalone: a connection is ready; Sentinel: a
  // connection to the primary the sentinels named is ready; cluster: the slot map is
  // known and every primary in it has a ready connection); else why not, e.g.
  // "redis unreachable at 127.0.0.1:6379: connection refused". Asks no server.
  absl::Status Health();

 protected:
  absl::StatusOr<Decision> DecideValidated(const DecideRequest& request) override;
  void DecideAsyncValidated(const DecideRequest& request, DecisionCallback done) override;
  absl::StatusOr<MultiDecision> DecideAllValidated(const MultiRequest& request) override;
  void DecideAllAsyncValidated(const MultiRequest& request, MultiCallback done) override;
  absl::StatusOr<Reservation> ReserveValidated(const ReserveRequest& request) override;
  absl::StatusOr<Reservation> TakeValidated(const TakeRequest& request) override;
  void TakeAsyncValidated(const TakeRequest& request, ReservationCallback done) override;
  absl::StatusOr<Decision> SettleValidated(const SettleRequest& request) override;
  void ReserveAsyncValidated(const ReserveRequest& request, ReservationCallback done) override;
  void SettleAsyncValidated(const SettleRequest& request, DecisionCallback done) override;
  absl::StatusOr<CountAnswer> CountValidated(const CountRequest& request) override;
  absl::StatusOr<Decision> OperateValidated(const OperateRequest& request) override;
  void OperateAsyncValidated(const OperateRequest& request, DecisionCallback done) override;
  void CountAsyncValidated(const CountRequest& request, CountCallback done) override;

 private:
  friend struct redis::StoreTesting;  // src/store/redis/store_testing.h
  class Impl;
  explicit RedisStore(std::unique_ptr<Impl> impl);
  // Sends a valid decision to its key's budget or to Redis.
  void Route(const DecideRequest& request, DecisionCallback done);
  // The topology's own /metrics lines (Redis Cluster's, Sentinel's).
  void AppendTopologyMetrics(const RedisStats& stats, std::string& out) const;
  // Declared first, so destroyed after the Impl whose callbacks may still reach it.
  std::unique_ptr<prefetch::Budgets> budgets_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate
