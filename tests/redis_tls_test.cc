// TLS to Redis (rediss://) against a real redis-server serving TLS on loopback.
//
// With certificates this test generates (openssl): verification against ca= or the system trust
// store (SSL_CERT_FILE), client certificates, and the failures that must be clear errors: an
// unknown CA, a certificate for another host, a missing client cert.
#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "redis_server.h"
#include "test_certificates.h"

namespace floodgate::testing {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = std::make_unique<Certificates>();
    // Two CAs; the server's certificate (for 127.0.0.1 only) and a client's, from the first.
    // Each step stops the rest when it fails; ok() says whether all were made.
    static_cast<void>(certs_->Ca("ca") && certs_->Ca("other-ca") &&
                      certs_->Leaf("server", "ca", "subjectAltName=IP:127.0.0.1") &&
                      certs_->Leaf("client", "ca", "extendedKeyUsage=clientAuth") &&
                      certs_->Leaf("named", "ca", "subjectAltName=DNS:redis.test"));
  }
  static void TearDownTestSuite() { certs_.reset(); }
  void SetUp() override { ASSERT_TRUE(certs_->ok()); }

  // A server with TLS on its own port (the plain port stays for the fixture's checks).
  std::unique_ptr<RedisServer> StartTlsServer(bool require_client_cert) {
    tls_port_ = FreeLoopbackPort();
    return RedisServer::Start({"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                               (*certs_)["server.crt"], "--tls-key-file", (*certs_)["server.key"],
                               "--tls-ca-cert-file", (*certs_)["ca.crt"], "--tls-auth-clients",
                               require_client_cert ? "yes" : "no"});
  }
  absl::StatusOr<std::unique_ptr<RedisStore>> Open(const std::string& url) {
    auto options = RedisStoreOptions::FromUrl(url);
    if (!options.ok()) return options.status();
    return RedisStore::Open(*options);
  }
  std::string Url(const std::string& host, const std::string& query) const {
    // The timeout is a guard: these tests want Redis's answers, never on_error's.
    return fmt::format("rediss://{}:{}?connect_timeout=60s&timeout=60s{}{}", host, tls_port_,
                       query.empty() ? "" : "&", query);
  }
  // 10/h: the key then lives 6 min, long enough to be looked for (10/s kept it 100 ms).
  static void ExpectDecides(RedisStore& store) {
    auto d = store.Decide({"tls-key", *Policy::Parse("gcra:10/1h"), 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
    EXPECT_TRUE(d->allowed);
  }

  static inline std::unique_ptr<Certificates> certs_;
  int tls_port_ = 0;
};

TEST_F(TlsTest, VerifiedAgainstTheGivenCa) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  auto store = Open(Url("127.0.0.1", "ca=" + (*certs_)["ca.crt"]));
  ASSERT_TRUE(store.ok()) << store.status();
  ExpectDecides(**store);
  EXPECT_THAT((*store)->Describe(), HasSubstr("rediss://"));
  // The key reached Redis over TLS.
  EXPECT_EQ(server->Cli({"EXISTS", "fg:gcra:tls-key"}), "1\n");
}

TEST_F(TlsTest, TheSystemTrustStoreHonoursSslCertFile) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(setenv("SSL_CERT_FILE", (*certs_)["ca.crt"].c_str(), 1), 0);
  auto store = Open(Url("127.0.0.1", ""));
  unsetenv("SSL_CERT_FILE");
  ASSERT_TRUE(store.ok()) << store.status();
  ExpectDecides(**store);
}

TEST_F(TlsTest, AnUnknownCaIsAClearError) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  auto store = Open(Url("127.0.0.1", "ca=" + (*certs_)["other-ca.crt"]));
  ASSERT_FALSE(store.ok());
  const std::string message(store.status().message());
  EXPECT_THAT(message, HasSubstr("TLS handshake"));
  EXPECT_THAT(message, HasSubstr("certificate verify failed"));
  EXPECT_THAT(message, HasSubstr(std::to_string(tls_port_)));
}

TEST_F(TlsTest, ACertificateForAnotherHostIsRefused) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  // The certificate names 127.0.0.1 only; "localhost" resolves there but is not named.
  auto store = Open(Url("localhost", "ca=" + (*certs_)["ca.crt"]));
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("certificate verify failed"));
}

// Cluster primaries are dialled by the address they announce: sni= names the server the
// certificate must be for, whatever address was dialled.
TEST_F(TlsTest, AServerNameInsteadOfTheAddressDialled) {
  tls_port_ = FreeLoopbackPort();
  auto server =
      RedisServer::Start({"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                          (*certs_)["named.crt"], "--tls-key-file", (*certs_)["named.key"],
                          "--tls-ca-cert-file", (*certs_)["ca.crt"], "--tls-auth-clients", "no"});
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(Open(Url("127.0.0.1", "ca=" + (*certs_)["ca.crt"])).ok());
  auto named = Open(Url("127.0.0.1", "ca=" + (*certs_)["ca.crt"] + "&sni=redis.test"));
  ASSERT_TRUE(named.ok()) << named.status();
  ExpectDecides(**named);
  EXPECT_FALSE(Open(Url("127.0.0.1", "ca=" + (*certs_)["ca.crt"] + "&sni=other.test")).ok());
}

TEST_F(TlsTest, ClientCertificates) {
  auto server = StartTlsServer(true);
  ASSERT_NE(server, nullptr);
  auto without = Open(Url("127.0.0.1", "ca=" + (*certs_)["ca.crt"]));
  EXPECT_FALSE(without.ok());
  auto with = Open(Url("127.0.0.1", fmt::format("ca={}&cert={}&key={}", (*certs_)["ca.crt"],
                                                (*certs_)["client.crt"], (*certs_)["client.key"])));
  ASSERT_TRUE(with.ok()) << with.status();
  ExpectDecides(**with);
}

// A Redis Cluster speaking TLS everywhere (clients and the cluster bus): the store finds
// the primaries' TLS ports through CLUSTER SLOTS and verifies every one of them.
TEST_F(TlsTest, AClusterOverTls) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::vector<int> tls_ports;
  std::string create =
      fmt::format("redis-cli --tls --cacert '{}' --cluster create", (*certs_)["ca.crt"]);
  for (int i = 0; i < 3; ++i) {
    const int tls_port = FreeLoopbackPort();
    auto node = RedisServer::Start(
        {"--tls-port", std::to_string(tls_port), "--tls-cert-file", (*certs_)["server.crt"],
         "--tls-key-file", (*certs_)["server.key"], "--tls-ca-cert-file", (*certs_)["ca.crt"],
         "--tls-auth-clients", "no", "--tls-cluster", "yes", "--cluster-enabled", "yes",
         "--cluster-config-file", "nodes.conf", "--cluster-port",
         std::to_string(FreeLoopbackPort())});
    ASSERT_NE(node, nullptr);
    create += fmt::format(" 127.0.0.1:{}", tls_port);
    tls_ports.push_back(tls_port);
    nodes.push_back(std::move(node));
  }
  auto cluster = RedisCluster::Create(std::move(nodes), create + " --cluster-yes");
  ASSERT_NE(cluster, nullptr);

  auto options = RedisStoreOptions::FromUrl(fmt::format(
      "redis-cluster://127.0.0.1:{}?tls=1&ca={}&timeout=60s", tls_ports[0], (*certs_)["ca.crt"]));
  ASSERT_TRUE(options.ok()) << options.status();
  auto store = RedisStore::Open(*options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->redis_stats().nodes, 3u);
  const Policy policy = *Policy::Parse("fixed_window:5/1h");
  for (int i = 0; i < 60; ++i) {
    auto d = (*store)->Decide({fmt::format("client-{}", i), policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
  }
  for (auto& node : cluster->nodes()) {  // every primary was reached, over TLS
    EXPECT_GT(std::atoll(node->Cli({"DBSIZE"}).c_str()), 5) << "port " << node->port();
  }
  // The wrong CA fails against the cluster too.
  auto wrong = RedisStoreOptions::FromUrl(
      fmt::format("redis-cluster://127.0.0.1:{}?tls=1&ca={}&connect_timeout=2s", tls_ports[0],
                  (*certs_)["other-ca.crt"]));
  ASSERT_TRUE(wrong.ok());
  auto refused = RedisStore::Open(*wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("certificate verify failed"));
}

TEST_F(TlsTest, BadFilesAndOptionsAreClearErrors) {
  auto missing = Open("rediss://127.0.0.1:1?ca=/nonexistent/ca.pem");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/ca.pem"));
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis://h:1?ca=x").ok());     // TLS option, no TLS
  EXPECT_FALSE(RedisStoreOptions::FromUrl("rediss://h:1?cert=c").ok());  // cert without key
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis-cluster://h:1?tls=2").ok());
  auto cluster = RedisStoreOptions::FromUrl("redis-cluster://h:1,h:2?tls=1&ca=x");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(cluster->tls);
  EXPECT_EQ(cluster->Describe(), "redis-cluster://h:1,h:2?tls=1&ca=x");
}

}  // namespace
}  // namespace floodgate::testing
