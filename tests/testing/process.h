// Child processes for integration tests: spawn with output captured to files, signal, wait.
#ifndef TESSEL_TESTS_TESTING_PROCESS_H_
#define TESSEL_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessel::testing {

// A running child. The destructor kills (SIGKILL) and reaps it if it is still running.
class Process {
 public:
  // Starts `argv[0]` with `argv`, stdout and stderr appended to the given files.
  static absl::StatusOr<Process> Start(const std::vector<std::string>& argv,
                                       const std::string& stdout_path,
                                       const std::string& stderr_path);
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // Waits up to `timeout`; the exit code (or 128 + signal), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a command to completion (killed after `timeout`), capturing its output.
RunResult Run(const std::vector<std::string>& argv, const std::string& scratch_dir,
              std::chrono::milliseconds timeout = std::chrono::seconds(300));

// Reads a whole file; "" when absent.
std::string ReadFile(const std::string& path);

// A tessel-server process and the address it listens on ("127.0.0.1:PORT").
struct ServerProcess {
  Process process;
  std::string address;
};

// Starts `server_bin` with --listen `listen` (port 0), --db `db`, `extra` flags and a port file
// in `dir` (its output goes to dir/server.out and dir/server.err), and waits up to 20 s for the
// port it bound. DeadlineExceeded, with the server's stderr, when it does not report one.
absl::StatusOr<ServerProcess> StartServerProcess(const std::string& server_bin,
                                                 const std::string& dir, const std::string& db,
                                                 const std::vector<std::string>& extra,
                                                 const std::string& listen = "127.0.0.1:0");

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_PROCESS_H_
