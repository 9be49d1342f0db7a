#include "tests/testing/temp_dir.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace tessel::testing {

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    std::perror(("mkdtemp " + pattern).c_str());
    std::abort();
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  const char* keep = std::getenv("TESSEL_KEEP_TEST_DIRS");
  if (keep_ || (keep && std::string(keep) == "1")) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::File(const std::string& name) const { return path_ + "/" + name; }

}  // namespace tessel::testing
