// POST /v1/reserve, /v1/settle, /v1/acquire and /v1/release without sockets.

#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

TEST_F(ServiceTest, ReserveThenSettleRefundsTheUnusedEstimateOnce) {
  const auto post = [&](const char* path, const std::string& body) {
    return Call(http::verb::post, path, body);
  };
  Response r = post("/v1/reserve", R"({"key":"u","policy":"gcra:10/1h","estimate":6})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  nlohmann::json body = Body(r);
  EXPECT_EQ(body["allowed"], true);
  EXPECT_EQ(body["remaining"], 4);
  EXPECT_EQ(body["hold_us"], 300'000'000);
  const std::string id = body["reservation"];
  EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), "4");

  r = post("/v1/settle", fmt::format(R"({{"reservation":"{}","actual":2}})", id));
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["remaining"], 8);
  r = post("/v1/settle", fmt::format(R"({{"reservation":"{}","actual":2}})", id));
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_EQ(Body(r)["code"], "not_found");
  // /v1/check on the same key and policy sees exactly the 8 the settle left.
  EXPECT_EQ(Body(post("/v1/check", R"({"key":"u","policy":"gcra:10/1h","cost":8})"))["allowed"],
            true);
  EXPECT_EQ(Body(post("/v1/check", R"({"key":"u","policy":"gcra:10/1h"})"))["allowed"], false);

  // A denied reservation holds nothing and carries no id.
  r = post("/v1/reserve", R"({"key":"u","policy":"gcra:10/1h","estimate":1})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_FALSE(Body(r).contains("reservation"));
  EXPECT_EQ(Header(r, "Retry-After").empty(), false);
}

TEST_F(ServiceTest, ReserveOnARuleSharesTheRuleLimitWithCheck) {
  const auto post = [&](const char* path, const std::string& body) {
    return Body(Call(http::verb::post, path, body));
  };
  // api: fixed_window:2/1h, keyed as /v1/check keys it.
  nlohmann::json reserved = post("/v1/reserve", R"({"key":"k","rule":"api","estimate":2})");
  ASSERT_EQ(reserved["allowed"], true) << reserved;
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], false);
  const std::string settle =
      fmt::format(R"({{"reservation":"{}","actual":1}})", std::string(reserved["reservation"]));
  EXPECT_EQ(post("/v1/settle", settle)["remaining"], 1);
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], true);
  EXPECT_EQ(post("/v1/check", R"({"key":"k","rule":"api"})")["allowed"], false);
}

// docs/leases.md over HTTP: N leases, the next denied until a release; a released or
// unknown lease is 404; a check may only peek at a concurrency limit; bad input is named.
TEST_F(ServiceTest, AcquireHoldsALeaseUntilItsRelease) {
  const auto post = [&](const char* path, const std::string& body) {
    return Call(http::verb::post, path, body);
  };
  const std::string acquire = R"({"key":"export","policy":"concurrency:2,lease=1m"})";
  std::vector<std::string> leases;
  for (int i = 0; i < 2; ++i) {
    const Response r = post("/v1/acquire", acquire);
    ASSERT_EQ(r.result_int(), 200) << r.body;
    const nlohmann::json body = Body(r);
    EXPECT_EQ(body["allowed"], true);
    EXPECT_EQ(body["remaining"], 1 - i);
    EXPECT_EQ(body["lease_us"], 60'000'000);
    leases.push_back(body["lease"]);
  }
  EXPECT_NE(leases[0], leases[1]);
  Response r = post("/v1/acquire", acquire);
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_FALSE(Body(r).contains("lease"));
  EXPECT_FALSE(Header(r, "Retry-After").empty()) << "the earliest lease expiry";

  r = post("/v1/release", fmt::format(R"({{"lease":"{}"}})", leases[0]));
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["remaining"], 1);
  r = post("/v1/release", fmt::format(R"({{"lease":"{}"}})", leases[0]));
  EXPECT_EQ(r.result_int(), 404) << "released already";
  EXPECT_EQ(post("/v1/release", R"({"lease":"0123456789abcdef"})").result_int(), 404);
  EXPECT_EQ(Body(post("/v1/acquire", acquire))["allowed"], true) << "the freed lease";

  const auto refused = [&](const char* path, const char* body, const char* message) {
    const Response answer = post(path, body);
    EXPECT_EQ(answer.result_int(), 400) << path << " " << body << ": " << answer.body;
    EXPECT_THAT(std::string(Body(answer)["message"]), HasSubstr(message)) << body;
  };
  refused("/v1/check", R"({"key":"export","policy":"concurrency:2,lease=1m"})",
          "held with Acquire and freed with Release");
  EXPECT_EQ(
      Body(post("/v1/check",
                R"({"key":"export","policy":"concurrency:2,lease=1m","cost":0})"))["remaining"],
      0);
  refused("/v1/acquire", R"({"key":"export","policy":"gcra:1/1s"})",
          "acquired under a concurrency policy");
  refused("/v1/acquire", R"({"key":"export","policy":"concurrency:2","estimate":1})",
          "unknown field \"estimate\"");
  refused("/v1/reserve", R"({"key":"export","policy":"concurrency:2,lease=1m","estimate":1})",
          "use Acquire");
  refused("/v1/release", R"({"reservation":"x"})", "unknown field \"reservation\"");
  refused("/v1/release", "{}", "missing \"lease\"");
}

TEST_F(ServiceTest, ReserveAndSettleRefuseBadInputWithTheReason) {
  const auto expect = [&](const char* path, const char* body, int status, const char* message) {
    const Response r = Call(http::verb::post, path, body);
    EXPECT_EQ(r.result_int(), status) << path << " " << body << ": " << r.body;
    EXPECT_THAT(std::string(Body(r)["message"]), HasSubstr(message)) << path << " " << body;
  };
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s"})", 400, "missing \"estimate\"");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":0})", 400,
         "estimate must be between 1 and");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":1,"cost":1})", 400,
         "unknown field \"cost\" (key, rule, policy, estimate, hold_ms)");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":"1"})", 400,
         "\"estimate\" must be a whole number");
  expect("/v1/reserve", R"({"key":"u","policy":"gcra:1/1s","estimate":1,"hold_ms":0})", 400,
         "\"hold_ms\" must be from 1 to 86400000");
  expect("/v1/reserve", R"({"key":"u","rule":"nope","estimate":1})", 404, "unknown rule \"nope\"");
  expect("/v1/reserve", R"({"key":"u","rule":"api","policy":"gcra:1/1s","estimate":1})", 400,
         "exactly one of");
  expect("/v1/reserve", "[1]", 400, "the body must be a JSON object");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef"})", 400, "missing \"actual\"");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef","actual":-1})", 400,
         "actual must be between 0 and");
  expect("/v1/settle", R"({"reservation":"0123456789abcdef","actual":1})", 404,
         "unknown reservation");
  EXPECT_EQ(Call(http::verb::get, "/v1/reserve").result_int(), 405);
  EXPECT_EQ(Call(http::verb::get, "/v1/settle").result_int(), 405);
}

}  // namespace
}  // namespace floodgate::server
