// The Redis store over a unix socket: its URL, the conformance vectors, reconnects, errors.
#include <filesystem>

#include "redis_test_fixture.h"

namespace floodgate::testing {
namespace {

// The reason FromUrl gives for `url`, or "" when it accepts it.
std::string UnixUrlRefusal(const std::string& url) {
  auto options = RedisStoreOptions::FromUrl(url);
  return options.ok() ? "" : std::string(options.status().message());
}

TEST(RedisUnixUrl, ParsesThePathCredentialsAndDatabase) {
  auto o = RedisStoreOptions::FromUrl("redis+unix:///run/redis/redis.sock");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->unix_socket, "/run/redis/redis.sock");
  EXPECT_FALSE(o->cluster);
  EXPECT_FALSE(o->tls);
  EXPECT_EQ(o->db, 0);
  EXPECT_EQ(o->Describe(), "redis+unix:///run/redis/redis.sock?db=0");

  o = RedisStoreOptions::FromUrl(
      "redis+unix://app:p%40ss%2Fw@/var/run/my%20redis.sock?db=3&timeout=5ms&connections=4");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->unix_socket, "/var/run/my redis.sock");
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "p@ss/w");
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->timeout, milliseconds(5));
  EXPECT_EQ(o->connections, 4);
  EXPECT_EQ(o->Describe(), "redis+unix://app:***@/var/run/my redis.sock?db=3&timeout=5ms&connections=4");

  o = RedisStoreOptions::FromUrl("redis+unix://secret@/r.sock");  // a password alone
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->user, "");
  EXPECT_EQ(o->password, "secret");
}

TEST(RedisUnixUrl, RefusesWhatASocketCannotBe) {
  EXPECT_THAT(UnixUrlRefusal("redis+unix://"), HasSubstr("expected an absolute socket path"));
  EXPECT_THAT(UnixUrlRefusal("redis+unix://relative.sock"),
              HasSubstr("expected an absolute socket path"));
  EXPECT_THAT(UnixUrlRefusal("redis+unix:///"), HasSubstr("missing socket path"));
  EXPECT_THAT(UnixUrlRefusal("redis+unix://localhost/tmp/r.sock"),
              HasSubstr("a unix socket has no host, got \"localhost\""));
  EXPECT_THAT(UnixUrlRefusal("redis+unix:///tmp/" + std::string(120, 'x')),
              HasSubstr("more than the 107 a unix socket address holds"));
  EXPECT_THAT(UnixUrlRefusal("redis+unix:///tmp/r.sock?db=x"),
              HasSubstr("database must be a number, got \"x\""));
  EXPECT_THAT(UnixUrlRefusal("redis+unix:///tmp/r%zz.sock"), HasSubstr("bad %-escape"));
  for (const char* tls : {"tls=1", "ca=/ca.pem", "sni=redis"}) {
    EXPECT_THAT(UnixUrlRefusal(fmt::format("redis+unix:///tmp/r.sock?{}", tls)),
                HasSubstr("Redis serves TLS on TCP only"))
        << tls;
  }
  EXPECT_THAT(UnixUrlRefusal("rediss+unix:///tmp/r.sock"), HasSubstr("TLS on TCP only"));
  EXPECT_THAT(UnixUrlRefusal("redis-cluster:///tmp/r.sock"),
              HasSubstr("Redis Cluster is reached over TCP"));
  // db= belongs to the socket form; redis:// keeps its database in the path.
  EXPECT_THAT(UnixUrlRefusal("redis://h:1?db=2"), HasSubstr("redis://host:port/N"));
  EXPECT_THAT(std::string(CheckStoreUrl("unix:///tmp/r.sock").message()),
              HasSubstr("Redis on a unix socket is redis+unix:///path"));
  EXPECT_TRUE(CheckStoreUrl("redis+unix:///tmp/r.sock?db=1").ok());

  // Options built in code are checked at Open.
  RedisStoreOptions options;
  options.unix_socket = "/tmp/r.sock";
  options.tls = true;
  auto store = RedisStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("without TLS"));
}

TEST_F(RedisUnixTest, ConformanceVectorsOneCallPerDecision) {
  auto store = OpenRedis(Url("batch=1"));
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Describe(),
              ::testing::StartsWith(fmt::format("redis+unix://{}?db=0&", server_->unix_socket())));
  ExpectVectorsOneCallPerDecision(*store);
}

TEST_F(RedisUnixTest, ConformanceVectorsBatched) {
  auto store = OpenRedis(Url("connections=1&batch=7"));
  ASSERT_NE(store, nullptr);
  ExpectVectorsBatched(*store, *server_);
}

// The server listens on no TCP port at all, so these keys came over the socket; db= picks
// the database and the password is sent as AUTH.
TEST(RedisUnix, AuthenticatesAndSelectsTheDatabase) {
  auto server = RedisServer::StartOnUnixSocket({"--requirepass", "s3cret"});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Cli({"--no-auth-warning", "-a", "s3cret", "CONFIG", "GET", "port"}),
            "port\n0\n");
  auto refused = RedisStoreOptions::FromUrl(server->url("connect_timeout=2s"));
  ASSERT_TRUE(refused.ok());
  auto no_password = RedisStore::Open(*refused);
  ASSERT_FALSE(no_password.ok());
  EXPECT_THAT(std::string(no_password.status().message()), HasSubstr("needs a password"));
  EXPECT_THAT(std::string(no_password.status().message()),
              HasSubstr("give it in the URL: redis+unix://:PASSWORD@/path"));

  auto store = OpenRedis(
      fmt::format("redis+unix://s3cret@{}?db=5&prefix=u:&timeout=60s", server->unix_socket()));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:3/1h");
  for (int i = 0; i < 4; ++i) {
    auto d = store->Decide({"k", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
    EXPECT_EQ(d->allowed, i < 3);
  }
  EXPECT_EQ(server->Cli({"--no-auth-warning", "-a", "s3cret", "-n", "5", "DBSIZE"}), "1\n");
  EXPECT_EQ(server->Cli({"--no-auth-warning", "-a", "s3cret", "-n", "0", "DBSIZE"}), "0\n");
}

// A restarted server leaves a stale socket file meanwhile (connection refused), then
// takes the path again; the store reconnects by itself.
TEST(RedisUnix, RestartDegradesThenReconnects) {
  auto server = RedisServer::StartOnUnixSocket();
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=60s&on_error=fail_closed&connections=1"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);

  server->Kill();
  const auto down = store->Decide({"k", policy, 1, std::nullopt});
  ASSERT_TRUE(down.ok());
  EXPECT_TRUE(down->degraded);
  EXPECT_FALSE(down->allowed);  // fail_closed: nothing from the local limiter
  EXPECT_THAT(std::string(MessageOf(store->Health())), HasSubstr(server->unix_socket()));

  ASSERT_TRUE(server->Restart());
  EXPECT_TRUE(TimeUntilRedisAnswers(*store, "k", policy, kHangGuard).has_value());
  EXPECT_GE(store->redis_stats().reconnects, 1u);
}

// No file at the path: Open fails with the path and the reason (no such file, not a
// connect timeout waited out); with lazy_connect it opens and Health() says the same.
TEST(RedisUnix, AMissingSocketIsAClearError) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "floodgate-no-such-dir" / "redis.sock").string();
  auto store = RedisStore::Open(
      *RedisStoreOptions::FromUrl(fmt::format("redis+unix://{}?connect_timeout=600s", path)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(std::string(MessageOf(store.status())),
            fmt::format("redis unreachable at {}: no such file or directory", path));

  auto lazy = RedisStore::Open(*RedisStoreOptions::FromUrl(
      fmt::format("redis+unix://{}?lazy_connect=1&connect_timeout=600s&timeout=50ms", path)));
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  EXPECT_EQ(std::string(MessageOf((*lazy)->Health())),
            fmt::format("redis unreachable at {}: no such file or directory", path));
  auto d = (*lazy)->Decide({"k", *Policy::Parse("gcra:5/1s"), 1, std::nullopt});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->degraded);
}

}  // namespace
}  // namespace floodgate::testing
