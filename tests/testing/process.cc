#include "tests/testing/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "fmt/format.h"

extern char** environ;

namespace tessel::testing {

absl::StatusOr<Process> Process::Start(const std::vector<std::string>& argv,
                                       const std::string& stdout_path,
                                       const std::string& stderr_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(fmt::format("cannot start {}: {}", argv[0], strerror(rc)));
  }
  return Process(pid);
}

Process::Process(Process&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = other.pid_;
    other.pid_ = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Process::Signal(int signal) const {
  if (pid_ > 0) kill(pid_, signal);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

RunResult Run(const std::vector<std::string>& argv, const std::string& scratch_dir,
              std::chrono::milliseconds timeout) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  const std::string out_path = fmt::format("{}/run{}.out", scratch_dir, n);
  const std::string err_path = fmt::format("{}/run{}.err", scratch_dir, n);
  RunResult result;
  auto process = Process::Start(argv, out_path, err_path);
  if (!process.ok()) {
    result.err = std::string(process.status().message());
    return result;
  }
  auto code = process->Wait(timeout);
  result.exit_code = code.value_or(-2);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<ServerProcess> StartServerProcess(const std::string& server_bin,
                                                 const std::string& dir, const std::string& db,
                                                 const std::vector<std::string>& extra,
                                                 const std::string& listen) {
  const std::string port_file = dir + "/port";
  std::remove(port_file.c_str());
  std::vector<std::string> argv = {server_bin, "--listen",    listen,   "--db",
                                   db,         "--port-file", port_file};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<Process> server = Process::Start(argv, dir + "/server.out", dir + "/server.err");
  if (!server.ok()) return server.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string port = ReadFile(port_file);
    if (!port.empty() && port.back() == '\n') {
      return ServerProcess{*std::move(server), "127.0.0.1:" + port.substr(0, port.size() - 1)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("server did not report its port; stderr:\n" +
                                     ReadFile(dir + "/server.err"));
}

}  // namespace tessel::testing
