// A fresh directory for one test, removed with everything in it when the TempDir goes away.
// Set TESSEL_KEEP_TEST_DIRS=1 to keep it for a post-mortem.
#ifndef TESSEL_TESTS_TESTING_TEMP_DIR_H_
#define TESSEL_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace tessel::testing {

class TempDir {
 public:
  // Creates $TMPDIR/<prefix>XXXXXX (or under /tmp); aborts the test binary if that fails, since
  // no test can run without it.
  explicit TempDir(const std::string& prefix = "tessel-test-");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  // `path()/name` (not created).
  std::string File(const std::string& name) const;
  // Leaves the directory in place (for a failed test's post-mortem).
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_TEMP_DIR_H_
