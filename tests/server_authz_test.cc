// /v1/authz without sockets: rules, identities, trusted proxies, the anonymous cookie.

#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

TEST_F(ServiceTest, AuthzAllowsThenDeniesWithHeadersAndBody) {
  const std::vector<std::pair<std::string, std::string>> login = {
      {"X-Original-URI", "/login?next=/"}, {"X-Original-Method", "POST"}};
  for (int i = 0; i < 3; ++i) {
    const Response r = Call(http::verb::get, "/v1/authz", "", login);
    EXPECT_EQ(r.result_int(), 204);
    EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), std::to_string(2 - i));
  }
  Response r = Call(http::verb::get, "/v1/authz", "", login);
  EXPECT_EQ(r.result_int(), 429);
  // The spec's body, plus the limit(s) that denied (issue 12).
  EXPECT_EQ(r.body, R"({"status": 429, "code": "rate_limit:exceeded", "denied_by": ["login"]})");
  EXPECT_EQ(Header(r, "Retry-After"), "900");
  EXPECT_EQ(Call(http::verb::get, "/v1/authz?deny_status=403", "", login).result_int(), 403);
  // No rule matches a GET of /login: allowed without touching the store.
  const auto keys = store_->Stats().keys;
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", {{"X-Original-URI", "/login"}}).result_int(),
            204);
  EXPECT_EQ(store_->Stats().keys, keys);
}

TEST_F(ServiceTest, TrustedProxiesDecideWhichAddressIsTheClient) {
  const auto login = [&](const char* peer, const char* xff) {
    std::vector<std::pair<std::string, std::string>> h = {{"X-Original-URI", "/login"},
                                                          {"X-Original-Method", "POST"}};
    if (xff != nullptr) h.emplace_back("X-Forwarded-For", xff);
    return Call(http::verb::post, "/v1/authz", "", h, peer).result_int();
  };
  // Behind the trusted proxy 10.0.0.1, two clients get separate limits.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("10.0.0.1", "203.0.113.5, 10.0.0.9"), 204);
  EXPECT_EQ(login("10.0.0.1", "203.0.113.5, 10.0.0.9"), 429);
  EXPECT_EQ(login("10.0.0.1", "203.0.113.6"), 204);
  // An untrusted peer's X-Forwarded-For is ignored: spoofing gains nothing.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("198.51.100.7", "1.2.3.4"), 204);
  EXPECT_EQ(login("198.51.100.7", "5.6.7.8"), 429);
  // Several X-Forwarded-For lines, in any letter case, read as one list.
  const auto two_lines = [&] {
    return Call(http::verb::post, "/v1/authz", "",
                {{"X-Original-URI", "/login"},
                 {"X-Original-Method", "POST"},
                 {"x-forwarded-for", "198.18.0.1"},
                 {"X-FORWARDED-FOR", "10.0.0.7"}},
                "10.0.0.1")
        .result_int();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(two_lines(), 204);
  EXPECT_EQ(login("10.0.0.1", "198.18.0.1"), 429);  // the same client as above
  // The right-most untrusted address is the client, not a spoofed left-most one.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("::1", "9.9.9.9, 192.0.2.1, 10.0.0.3"), 204);
  EXPECT_EQ(login("::1", "1.1.1.1, 192.0.2.1"), 429);
  // IPv6 all the way: a trusted IPv6 proxy range, IPv6 hops, an IPv6 client.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("fd00::7", "2001:db8::1, fd00::9"), 204);
  EXPECT_EQ(login("fd00::8", "2001:db8::1"), 429);
  EXPECT_EQ(login("fd00::7", "2001:db8::2, fd00::9"), 204);
  // An untrusted IPv6 peer is the client, whatever it forwards.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(login("2001:db8::66", "2001:db8::2"), 204);
  EXPECT_EQ(login("2001:db8::66", "2001:db8::3"), 429);
}

TEST_F(ServiceTest, CookieIdentityIssuesAnAnonymousCookieAndFallsBackToTheIp) {
  const std::vector<std::pair<std::string, std::string>> api = {{"X-Original-URI", "/api/x"}};
  const Response first = Call(http::verb::get, "/v1/authz", "", api);
  const std::string cookie = Header(first, "Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("fgid="));
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Lax"));
  const std::string id = cookie.substr(5, 36);
  EXPECT_EQ(id[14], '7');  // UUID version 7
  // Without the cookie, the IP's limit applies: a second cookie-less request is denied.
  Call(http::verb::get, "/v1/authz", "", api);
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", api).result_int(), 429);
  // With the cookie: its own limit, and no new cookie.
  auto with = api;
  with.emplace_back("Cookie", "other=1; fgid=" + id);
  const Response r = Call(http::verb::get, "/v1/authz", "", with);
  EXPECT_EQ(r.result_int(), 204);
  EXPECT_EQ(Header(r, "Set-Cookie"), "");
  // A forged cookie value is not trusted as an identity.
  auto forged = api;
  forged.emplace_back("Cookie", "fgid=anything");
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", forged).result_int(), 429);
}

TEST_F(ServiceTest, HeaderIdentityGivesEachValueItsOwnLimit) {
  const auto authz = [&](const char* path, const char* api_key, const char* peer) {
    std::vector<std::pair<std::string, std::string>> h = {{"X-Original-URI", path}};
    if (api_key != nullptr) h.emplace_back("X-Api-Key", api_key);
    return Call(http::verb::get, "/v1/authz", "", h, peer).result_int();
  };
  // header:X-Api-Key alone: one limit per key, whichever address sends it.
  EXPECT_EQ(authz("/byheader", "alpha", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/byheader", "alpha", "192.0.2.2"), 429);
  EXPECT_EQ(authz("/byheader", "beta", "192.0.2.1"), 204);
  // Without the header, the address is the identity.
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.3"), 204);
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.3"), 429);
  EXPECT_EQ(authz("/byheader", nullptr, "192.0.2.4"), 204);
  // ip+header:X-Api-Key: both must match to share a limit.
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.1"), 429);
  EXPECT_EQ(authz("/keyed", "beta", "192.0.2.1"), 204);
  EXPECT_EQ(authz("/keyed", "alpha", "192.0.2.2"), 204);
}

}  // namespace
}  // namespace floodgate::server
