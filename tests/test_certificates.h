#pragma once

// Certificates a test makes with `openssl`: CAs, and leaves each signed by one with its own
// extensions (subjectAltName, extendedKeyUsage). For the TLS tests of Redis and of gRPC.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "redis_server.h"

namespace floodgate::testing {

struct Leaf {
  std::string name;       // <name>.crt, <name>.key
  std::string ca;         // the CA signing it
  std::string extension;  // one openssl extension line
};

class Certificates {
 public:
  Certificates(const std::vector<std::string>& cas, const std::vector<Leaf>& leaves) {
    dir_ = (std::filesystem::temp_directory_path() / "floodgate-tls-XXXXXX").string();
    if (mkdtemp(dir_.data()) == nullptr) return;
    ok_ = true;
    for (const std::string& ca : cas) ok_ = ok_ && MakeCa(ca);
    for (const Leaf& leaf : leaves) ok_ = ok_ && MakeLeaf(leaf);
  }
  ~Certificates() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;
  bool ok() const { return ok_; }
  // The path of one of its files ("ca.crt", "server.key").
  std::string operator[](const std::string& file) const { return dir_ + "/" + file; }
  std::string dir() const { return dir_; }

 private:
  bool Run(const std::string& command) {
    int status = 0;
    const std::string out =
        RunShell(fmt::format("cd '{}' && {{ {}; }} 2>&1", dir_, command), &status);
    if (status != 0) ADD_FAILURE() << command << "\n" << out;
    return status == 0;
  }
  bool MakeCa(const std::string& name) {
    return Run(
        fmt::format("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                    "-days 2 -subj '/CN=floodgate test {0}' "
                    "-keyout {0}.key -out {0}.crt",
                    name));
  }
  bool MakeLeaf(const Leaf& leaf) {
    return Run(fmt::format("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                           "-subj '/CN={0}' -keyout {0}.key -out {0}.csr "
                           "&& printf '%s\\n' '{1}' > {0}.ext",
                           leaf.name, leaf.extension)) &&
           Run(fmt::format("openssl x509 -req -in {0}.csr -CA {1}.crt -CAkey {1}.key "
                           "-CAcreateserial -days 2 -extfile {0}.ext -out {0}.crt",
                           leaf.name, leaf.ca));
  }

  std::string dir_;
  bool ok_ = false;
};

}  // namespace floodgate::testing
