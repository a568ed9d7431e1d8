#pragma once

// Certificates a test makes with openssl in a temporary directory: CAs and leaves signed by them.
//
// For the tests of TLS to Redis (redis_tls_test.cc) and to an xDS server (rls_xds_test.cc).
// EC P-256 keys: made in milliseconds, where RSA keys take a noticeable share of a test.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "redis_server.h"  // RunShell

namespace floodgate::testing {

class Certificates {
 public:
  Certificates() {
    dir_ = (std::filesystem::temp_directory_path() / "floodgate-tls-XXXXXX").string();
    ok_ = mkdtemp(dir_.data()) != nullptr;
  }
  ~Certificates() { std::filesystem::remove_all(dir_); }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;

  // NAME.key and NAME.crt: a self-signed CA.
  bool Ca(const std::string& name) {
    return Run(
        fmt::format("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                    "-days 2 -subj '/CN=floodgate test {0}' "
                    "-keyout {0}.key -out {0}.crt",
                    name));
  }
  // NAME.key and NAME.crt signed by CA, with one X.509 v3 extension ("subjectAltName=...").
  bool Leaf(const std::string& name, const std::string& ca, const std::string& extension) {
    return Run(fmt::format("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                           "-subj '/CN={0}' -keyout {0}.key -out {0}.csr "
                           "&& printf '%s\\n' '{2}' > {0}.ext",
                           name, ca, extension)) &&
           Run(fmt::format("openssl x509 -req -in {0}.csr -CA {1}.crt -CAkey {1}.key "
                           "-CAcreateserial -days 2 -extfile {0}.ext -out {0}.crt",
                           name, ca));
  }
  // Whether the directory was made and every certificate asked for so far.
  bool ok() const { return ok_; }
  std::string operator[](const std::string& file) const { return dir_ + "/" + file; }

 private:
  bool Run(const std::string& command) {
    int status = 0;
    const std::string out =
        RunShell(fmt::format("cd '{}' && {{ {}; }} 2>&1", dir_, command), &status);
    if (status != 0) ADD_FAILURE() << command << "\n" << out;
    ok_ = ok_ && status == 0;
    return status == 0;
  }

  std::string dir_;
  bool ok_ = false;
};

}  // namespace floodgate::testing
