// POST /v1/check without sockets: answers, headers, and refused input.

#include "server/decider.h"
#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

TEST_F(ServiceTest, CheckWithAPolicyAnswersTheDecisionAndHeaders) {
  Response r = Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(Body(r), nlohmann::json::parse(R"({"allowed":true,"limit":2,"remaining":1,
                                               "retry_after_us":0,"reset_after_us":500000})"));
  EXPECT_EQ(Header(r, "X-RateLimit-Limit"), "2");
  EXPECT_EQ(Header(r, "X-RateLimit-Remaining"), "1");
  EXPECT_EQ(Header(r, "X-RateLimit-Reset"), "1");
  EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"policy\";q=2;w=1");
  EXPECT_EQ(Header(r, "RateLimit"), "\"policy\";r=1;t=1");
  EXPECT_EQ(Header(r, "Retry-After"), "");
  Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  r = Call(http::verb::post, "/v1/check", R"({"key":"u1","policy":"gcra:2/1s"})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_EQ(Header(r, "Retry-After"), "1");
}

TEST_F(ServiceTest, CheckTakesAPrefetchPolicyWhichMemoryDecidesAsWithout) {
  for (int i = 0; i < 2; ++i) {
    Response r =
        Call(http::verb::post, "/v1/check", R"({"key":"p1","policy":"gcra:2/1s,prefetch=auto"})");
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(Body(r)["allowed"], true);
  }
  Response r =
      Call(http::verb::post, "/v1/check", R"({"key":"p1","policy":"gcra:2/1s,prefetch=5"})");
  EXPECT_EQ(Body(r)["allowed"], false);
  r = Call(http::verb::post, "/v1/check", R"({"key":"p1","policy":"concurrency:2,prefetch=5"})");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_THAT(r.body, HasSubstr("prefetch is not for concurrency"));
}

TEST_F(ServiceTest, CheckWithARule) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Body(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api"})"))["allowed"],
              true);
  }
  Response r = Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api"})");
  EXPECT_EQ(Body(r)["allowed"], false);
  EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"api\";q=2;w=3600");
  // A cost in the request overrides the rule's; cost 0 peeks.
  EXPECT_EQ(
      Body(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api","cost":0})"))["allowed"],
      true);
}

struct BadCheck {
  const char* body;
  int status;
  const char* message;
};
class CheckRejects : public ServiceTest, public ::testing::WithParamInterface<BadCheck> {};
TEST_P(CheckRejects, WithTheRightStatusAndMessage) {
  const Response r = Call(http::verb::post, "/v1/check", GetParam().body);
  EXPECT_EQ(r.result_int(), GetParam().status) << GetParam().body;
  const auto body = Body(r);
  EXPECT_EQ(body["status"], GetParam().status);
  EXPECT_THAT(body["message"].get<std::string>(), HasSubstr(GetParam().message));
  EXPECT_EQ(store_->Stats().keys, 0u);  // nothing was decided
}
INSTANTIATE_TEST_SUITE_P(
    Table, CheckRejects,
    ::testing::Values(
        BadCheck{"{not json", 400, "the body must be a JSON object"},
        BadCheck{"[1,2]", 400, "the body must be a JSON object"},
        BadCheck{"", 400, "the body must be a JSON object"},
        BadCheck{R"({"policy":"gcra:1/1s"})", 400, "missing \"key\""},
        BadCheck{R"({"key":7,"policy":"gcra:1/1s"})", 400, "\"key\" must be a string"},
        BadCheck{R"({"key":"","policy":"gcra:1/1s"})", 400, "\"key\" must not be empty"},
        BadCheck{R"({"key":"k"})", 400, "give exactly one of \"rule\" and \"policy\""},
        BadCheck{R"({"key":"k","rule":"api","policy":"gcra:1/1s"})", 400, "exactly one"},
        BadCheck{R"({"key":"k","rule":"nope"})", 404, "unknown rule \"nope\""},
        BadCheck{R"({"key":"k","policy":"gcra:0/1s"})", 400, "limit must be between 1"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":-1})", 400, "\"cost\" must be"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":1e20})", 400, "\"cost\" must be"},
        BadCheck{R"({"key":"k","policy":"gcra:1/1s","cost":"1"})", 400, "\"cost\" must be"}),
    [](const auto& info) { return std::to_string(info.index); });

TEST_F(ServiceTest, CheckRejectsAKeyOver512Bytes) {
  const std::string body = R"({"key":")" + std::string(513, 'k') + R"(","policy":"gcra:1/1s"})";
  const Response r = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr("513 bytes; the limit is 512"));
  EXPECT_EQ(Call(http::verb::get, "/v1/check").result_int(), 405);
}

// One parser for every endpoint's fields: a field the endpoint does not take is refused by
// name, with the ones it takes.
TEST_F(ServiceTest, EveryEndpointRefusesUnknownFieldsByName) {
  const auto refused = [&](const char* path, const char* body, const char* message) {
    const Response r = Call(http::verb::post, path, body);
    EXPECT_EQ(r.result_int(), 400) << path << " " << body << ": " << r.body;
    EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr(message)) << body;
  };
  refused("/v1/check", R"({"key":"k","policy":"gcra:1/1s","colour":"red"})",
          "unknown field \"colour\" (key, rule, policy, cost)");
  refused("/v1/check", R"({"items":[{"key":"k","policy":"gcra:1/1s","estimate":1}]})",
          "items[0]: unknown field \"estimate\" (key, rule, policy, cost, name, hold_ms)");
  refused("/v1/reserve", R"({"key":"k","policy":"gcra:1/1s","estimate":1,"name":"x"})",
          "unknown field \"name\" (key, rule, policy, estimate, hold_ms)");
  refused("/v1/acquire", R"({"key":"k","policy":"concurrency:1","cost":1})",
          "unknown field \"cost\" (key, rule, policy)");
  refused("/v1/settle", R"({"reservation":"x","actual":1,"cost":1})",
          "unknown field \"cost\" (reservation, actual)");
  refused("/v1/release", R"({"lease":"x","actual":0})", "unknown field \"actual\" (lease)");
  // The same checks of the same fields everywhere.
  refused("/v1/check", R"({"items":[{"key":"","policy":"gcra:1/1s"}]})",
          "items[0]: \"key\" must not be empty");
  refused("/v1/reserve", R"({"key":"","policy":"gcra:1/1s","estimate":1})",
          "\"key\" must not be empty");
  refused("/v1/check", R"({"items":[{"key":"k","policy":"gcra:1/1s","hold_ms":0}]})",
          "items[0]: \"hold_ms\" must be from 1 to 86400000");
  const std::string long_key = std::string(513, 'k');
  refused("/v1/reserve",
          (R"({"key":")" + long_key + R"(","policy":"gcra:1/1s","estimate":1})").c_str(),
          "\"key\" is 513 bytes; the limit is 512");
  EXPECT_EQ(store_->Stats().keys, 0u);  // nothing was decided
}

// Issue 39: `"cost":0,"cost":1` charged (the last one won) where every other odd field is
// refused. A duplicate is refused by name on every endpoint, at every level.
TEST_F(ServiceTest, EveryEndpointRefusesAFieldGivenTwiceByName) {
  const auto refused = [&](const char* path, const char* body, const char* message) {
    const Response r = Call(http::verb::post, path, body);
    EXPECT_EQ(r.result_int(), 400) << path << " " << body << ": " << r.body;
    EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr(message)) << body;
  };
  refused("/v1/check", R"({"key":"k","policy":"gcra:1/1s","cost":0,"cost":1})",
          "field \"cost\" given twice");
  refused("/v1/check", R"({"key":"k","key":"other","policy":"gcra:1/1s"})",
          "field \"key\" given twice");
  refused("/v1/check", R"({"items":[{"key":"k","policy":"gcra:1/1s","name":"a","name":"b"}]})",
          "items[0]: field \"name\" given twice");
  refused(
      "/v1/check",
      R"({"items":[{"key":"k","policy":"gcra:1/1s"}],"items":[{"key":"k","policy":"gcra:1/1s"}]})",
      "field \"items\" given twice");
  refused("/v1/reserve", R"({"key":"k","policy":"gcra:1/1s","estimate":1,"estimate":0})",
          "field \"estimate\" given twice");
  refused("/v1/acquire", R"({"key":"k","rule":"api","rule":"login"})",
          "field \"rule\" given twice");
  refused("/v1/settle", R"({"reservation":"x","actual":1,"actual":0})",
          "field \"actual\" given twice");
  refused("/v1/release", R"({"lease":"x","lease":"y"})", "field \"lease\" given twice");
  EXPECT_EQ(store_->Stats().keys, 0u);  // nothing was decided
}

// A 64 KiB body holds thousands of items: they are counted before any is parsed.
TEST_F(ServiceTest, ItemsAreCountedBeforeAnyIsRead) {
  std::string body = R"({"items":[)";
  for (int i = 0; i < 3'000; ++i) {
    // Each item would be refused on its own: the count must come first.
    body += fmt::format(R"({}{{"key":"k{}","policy":"nonsense"}})", i == 0 ? "" : ",", i);
  }
  body += "]}";
  const Response r = Call(http::verb::post, "/v1/check", body);
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(Body(r)["message"], "\"items\" must hold 1 to 16 limits, got 3000");
}

// A CR LF in an item's name wrote headers of the client's choosing into the response: the
// name goes into RateLimit-Policy and RateLimit, printable ASCII only.
TEST_F(ServiceTest, AnItemsNameCannotWriteHeaders) {
  const Response r =
      Call(http::verb::post, "/v1/check",
           R"({"items":[{"key":"k","policy":"gcra:5/1s","name":"x\r\nSet-Cookie: evil=1"}]})");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(Body(r)["message"], "items[0]: \"name\" must be 0 to 64 printable ASCII characters");
  EXPECT_EQ(Header(r, "Set-Cookie"), "");
  EXPECT_EQ(Call(http::verb::post, "/v1/check",
                 fmt::format(R"({{"items":[{{"key":"k","policy":"gcra:5/1s","name":"{}"}}]}})",
                             std::string(65, 'n')))
                .result_int(),
            400);
  const Response ok =
      Call(http::verb::post, "/v1/check",
           R"({"items":[{"key":"k","policy":"gcra:5/1s","name":"a \"quoted\" name"}]})");
  EXPECT_EQ(ok.result_int(), 200);
  EXPECT_EQ(Header(ok, "RateLimit-Policy"), R"("a \"quoted\" name";q=5;w=1)");
}

class InlinePoliciesOff : public ServiceTest {
 protected:
  InlinePoliciesOff()
      : ServiceTest(R"(
inline_policies: false
rules:
  - name: api
    match: {path_prefix: /api}
    policy: fixed_window:2/1h
)") {}
};

TEST_F(InlinePoliciesOff, APolicyFromTheRequestIsForbiddenOnEveryEndpoint) {
  const auto forbidden = [&](const char* path, const char* body) {
    const Response r = Call(http::verb::post, path, body);
    EXPECT_EQ(r.result_int(), 403) << path << " " << body << ": " << r.body;
    EXPECT_EQ(Body(r)["code"], "permission_denied");
    EXPECT_THAT(Body(r)["message"].get<std::string>(),
                HasSubstr("inline policies are off (inline_policies: false)"));
  };
  forbidden("/v1/check", R"({"key":"k","policy":"gcra:1/1s"})");
  // Refused before the text is read: a zone path is not even looked at.
  forbidden("/v1/check", R"({"key":"k","policy":"fixed_window:5/1d,tz=/dev/stdin"})");
  forbidden("/v1/check",
            R"({"items":[{"key":"k","rule":"api"},{"key":"k","policy":"gcra:1/1s"}]})");
  forbidden("/v1/reserve", R"({"key":"k","policy":"gcra:1/1s","estimate":1})");
  forbidden("/v1/acquire", R"({"key":"k","policy":"concurrency:1"})");
  EXPECT_EQ(store_->Stats().keys, 0u);
  // The configured rules still decide.
  EXPECT_EQ(Call(http::verb::post, "/v1/check", R"({"key":"k","rule":"api"})").result_int(), 200);
}

TEST(ServerConfig, InlinePoliciesAreOnUnlessTurnedOff) {
  EXPECT_TRUE(ParseConfig("", "t.yaml")->inline_policies);
  EXPECT_FALSE(ParseConfig("inline_policies: false", "t.yaml")->inline_policies);
  EXPECT_FALSE(ParseConfig("inline_policies: nope", "t.yaml").ok());
}

// Issue 34: tz=/dev/stdin from any client blocked a server thread for good.
TEST_F(ServiceTest, AZoneIsNeverAPath) {
  for (const char* tz : {"/dev/stdin", "/proc/self/fd/0", "../../../../dev/stdin",
                         "file:/dev/stdin", "posix/Europe/Berlin"}) {
    const Response r = Call(http::verb::post, "/v1/check",
                            fmt::format(R"({{"key":"k","policy":"fixed_window:5/1d,tz={}"}})", tz));
    EXPECT_EQ(r.result_int(), 400) << tz;
    EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr("unknown time zone")) << tz;
  }
}

// Issue 37: the degraded log reported 1 of 396 degraded answers, the last second of a
// burst never (no later degraded answer came to report it). Each is reported once: by the
// once-a-second report, or by the first healthy answer after them.
TEST(EverySecondTest, EveryCountedOneIsReportedOnceByOneOfTheTwo) {
  EverySecond log;
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::hours(1));
  EXPECT_EQ(log.Count(t0), 1u);  // the first is reported at once
  EXPECT_EQ(log.Count(t0 + std::chrono::milliseconds(1)), 0u);
  EXPECT_EQ(log.Count(t0 + std::chrono::milliseconds(2)), 0u);
  EXPECT_EQ(log.Count(t0 + std::chrono::milliseconds(3)), 0u);
  EXPECT_EQ(log.TakeUnreported(), 3u);  // the burst's end: the three not reported yet
  EXPECT_EQ(log.TakeUnreported(), 0u);
  EXPECT_EQ(log.Count(t0 + std::chrono::milliseconds(4)), 0u);
  EXPECT_EQ(log.Count(t0 + std::chrono::seconds(2)), 2u);  // a second on: both at once
  EXPECT_EQ(log.TakeUnreported(), 0u);
}

}  // namespace
}  // namespace floodgate::server
