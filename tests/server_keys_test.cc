// POST /v1/keys/reset, /v1/keys/refund, /v1/keys/penalize without sockets: off without admin:,
// the token, the bodies, both doors' keys, the metrics, the token file at load.

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "service_test_fixture.h"

namespace floodgate::server {
namespace {

constexpr const char* kToken = "0123456789abcdef-admin";

// A token file that lives as long as the test.
class TokenFile {
 public:
  explicit TokenFile(std::string_view text) {
    std::string pattern = (std::filesystem::temp_directory_path() / "token-XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    close(fd);
    path_ = pattern;
    std::ofstream(path_) << text;
  }
  ~TokenFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string AdminConfig(const std::string& token_file) {
  return fmt::format("admin: {{token_file: {}}}\n{}", token_file, kConfig);
}

class KeysTest : public ::testing::Test {
 protected:
  KeysTest()
      : token_(std::string(kToken) + "\n"),
        store_(StoreAtOneInstant()),
        service_(store_, std::make_shared<const ServerConfig>(
                             *ParseConfig(AdminConfig(token_.path()), "t.yaml"))) {}

  Response Call(http::verb method, std::string target, std::string body,
                std::vector<std::pair<std::string, std::string>> headers, Service& service) {
    Request request(method, target, 11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    request.body() = std::move(body);
    request.prepare_payload();
    std::optional<Response> response;
    service.Handle(request, asio::ip::make_address("10.1.2.3"),
                   [&](Response r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());
    return response.value_or(Response{});
  }
  Response Post(std::string target, std::string body,
                std::string authorization = std::string("Bearer ") + kToken) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!authorization.empty()) headers.emplace_back("Authorization", authorization);
    return Call(http::verb::post, std::move(target), std::move(body), std::move(headers), service_);
  }
  static nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }

  TokenFile token_;
  std::shared_ptr<MemoryStore> store_;
  Service service_;
};

TEST(KeysOff, WithoutAdminEveryKeysPathIsNotFound) {
  Service service(StoreAtOneInstant(),
                  std::make_shared<const ServerConfig>(*ParseConfig(kConfig, "t.yaml")));
  for (const char* path : {"/v1/keys/reset", "/v1/keys/refund", "/v1/keys/penalize"}) {
    Request request(http::verb::post, path, 11);
    request.insert("Authorization", std::string("Bearer ") + kToken);
    request.body() = R"({"key":"a","policy":"gcra:1/1s","units":1})";
    request.prepare_payload();
    std::optional<Response> response;
    service.Handle(request, asio::ip::make_address("127.0.0.1"),
                   [&](Response r) { response = std::move(r); });
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 404) << path;
    EXPECT_EQ(nlohmann::json::parse(response->body)["code"], "not_found");
  }
}

// No token, a wrong one, one a byte short or long, another scheme: one answer for all.
TEST_F(KeysTest, WithoutTheTokenEveryAnswerIsTheSame401) {
  const std::string body = R"({"key":"a","policy":"gcra:1/1s"})";
  const std::string token = kToken;
  std::optional<std::string> first;
  const std::vector<std::string> wrong = {"",
                                          "Bearer",
                                          "Bearer ",
                                          "Bearer x" + token,
                                          "Bearer " + token + "x",
                                          "Bearer " + token.substr(1),
                                          "Basic " + token};
  for (const std::string& authorization : wrong) {
    const Response r = Post("/v1/keys/reset", body, authorization);
    EXPECT_EQ(r.result_int(), 401) << authorization;
    EXPECT_EQ(std::string(r.Header("WWW-Authenticate")), "Bearer");
    if (!first) first = r.body;
    EXPECT_EQ(r.body, *first) << authorization;
  }
  EXPECT_EQ(Post("/v1/keys/reset", body).result_int(), 200);
  EXPECT_EQ(Post("/v1/keys/reset", body, "bearer " + token).result_int(), 200);
  // A header value's surrounding whitespace is not part of it (RFC 9110, 5.5).
  EXPECT_EQ(Post("/v1/keys/reset", body, "Bearer " + token + " ").result_int(), 200);
  const std::string metrics = Call(http::verb::get, "/metrics", "", {}, service_).body;
  EXPECT_THAT(metrics, HasSubstr("floodgate_key_operations_unauthorized_total 7\n"));
}

TEST_F(KeysTest, RefundPenalizeAndResetAnInlinePolicysKey) {
  const auto check = [&](const char* body) {
    return Body(Call(http::verb::post, "/v1/check", body, {}, service_));
  };
  ASSERT_EQ(check(R"({"key":"u","policy":"gcra:10/1h","cost":10})")["allowed"], true);
  Response r = Post("/v1/keys/refund", R"({"key":"u","policy":"gcra:10/1h","units":4})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  EXPECT_EQ(Body(r)["allowed"], true);
  EXPECT_EQ(Body(r)["remaining"], 4);
  r = Post("/v1/keys/penalize", R"({"key":"u","policy":"gcra:10/1h","units":30})");
  EXPECT_EQ(Body(r)["remaining"], 0);
  EXPECT_EQ(check(R"({"key":"u","policy":"gcra:10/1h"})")["allowed"], false);
  r = Post("/v1/keys/reset", R"({"key":"u","policy":"gcra:10/1h"})");
  EXPECT_EQ(Body(r)["remaining"], 10);
  EXPECT_EQ(Body(r)["reset_after_us"], 0);
  EXPECT_EQ(check(R"({"key":"u","policy":"gcra:10/1h","cost":10})")["allowed"], true);
  const std::string metrics = Call(http::verb::get, "/metrics", "", {}, service_).body;
  EXPECT_THAT(metrics,
              HasSubstr(R"(floodgate_key_operations_total{rule="policy",operation="reset"} 1)"));
  EXPECT_THAT(metrics,
              HasSubstr(R"(floodgate_key_operations_total{rule="policy",operation="refund"} 1)"));
}

// The login guard: /v1/authz counts the attempts of 10.1.2.3; a reset of the rule's key
// (the identity, ip=10.1.2.3) frees both doors' state.
TEST_F(KeysTest, AResetOfARulesKeyMeetsWhatAuthzCounted) {
  const std::vector<std::pair<std::string, std::string>> login = {{"X-Original-URI", "/login"},
                                                                  {"X-Original-Method", "POST"}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", login, service_).result_int(), 204);
  }
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", login, service_).result_int(), 429);
  const Response r = Post("/v1/keys/reset", R"({"key":"ip=10.1.2.3","rule":"login"})");
  ASSERT_EQ(r.result_int(), 200) << r.body;
  const nlohmann::json items = Body(r)["items"];
  ASSERT_EQ(items.size(), 2u) << r.body;
  EXPECT_EQ(items[0]["name"], "login");
  EXPECT_EQ(items[0]["via"], "check");
  EXPECT_EQ(items[1]["via"], "authz");
  EXPECT_EQ(items[1]["remaining"], 3);
  EXPECT_EQ(Call(http::verb::get, "/v1/authz", "", login, service_).result_int(), 204);
}

TEST_F(KeysTest, BodiesAreReadStrictly) {
  const auto code = [&](const char* path, const char* body) {
    const Response r = Post(path, body);
    return std::pair{r.result_int(), Body(r)["code"].get<std::string>()};
  };
  using Answer = std::pair<int, std::string>;
  EXPECT_EQ(code("/v1/keys/refund", R"({"key":"a","policy":"gcra:1/1s"})"),
            (Answer{400, "invalid_argument"}));  // no units
  EXPECT_EQ(code("/v1/keys/refund", R"({"key":"a","policy":"gcra:1/1s","units":0})"),
            (Answer{400, "invalid_argument"}));
  EXPECT_EQ(code("/v1/keys/reset", R"({"key":"a","policy":"gcra:1/1s","units":1})"),
            (Answer{400, "invalid_argument"}));  // a reset takes none
  EXPECT_EQ(code("/v1/keys/penalize", R"({"key":"a","policy":"gcra:1/1s","units":1,"cost":1})"),
            (Answer{400, "invalid_argument"}));
  EXPECT_EQ(code("/v1/keys/penalize", R"({"key":"a","rule":"nope","units":1})"),
            (Answer{404, "not_found"}));
  EXPECT_EQ(code("/v1/keys/refund", R"({"key":"a","policy":"concurrency:3","units":1})"),
            (Answer{400, "invalid_argument"}));
  EXPECT_EQ(code("/v1/keys/reset", "not json"), (Answer{400, "invalid_argument"}));
  const Response get = Call(http::verb::get, "/v1/keys/reset", "",
                            {{"Authorization", std::string("Bearer ") + kToken}}, service_);
  EXPECT_EQ(get.result_int(), 405);
}

// The token file is read at load: missing, unreadable or too short refuses the config,
// naming the file.
TEST(KeysConfig, ATokenFileThatCannotBeReadRefusesTheConfig) {
  const std::string missing = "/nonexistent/floodgate-admin-token";
  auto config = ParseConfig(AdminConfig(missing), "t.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(missing));
  EXPECT_THAT(config.status().message(), HasSubstr("t.yaml:1"));
  TokenFile short_token("short\n");
  config = ParseConfig(AdminConfig(short_token.path()), "t.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("16 to 1024 characters"));
  TokenFile spaced("0123456789 abcdef\n");
  EXPECT_FALSE(ParseConfig(AdminConfig(spaced.path()), "t.yaml").ok());
  EXPECT_FALSE(ParseConfig(AdminConfig("/proc/self/status"), "t.yaml").ok());
  EXPECT_FALSE(ParseConfig("admin: {}\n", "t.yaml").ok());
  EXPECT_FALSE(ParseConfig("admin: {token_file: x, token: y}\n", "t.yaml").ok());
  TokenFile good(std::string("\n  ") + kToken + "\r\n");
  config = ParseConfig(AdminConfig(good.path()), "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->admin);
  EXPECT_EQ(config->admin->token, kToken);
}

}  // namespace
}  // namespace floodgate::server
