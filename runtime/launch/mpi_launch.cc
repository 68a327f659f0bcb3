#include "runtime/launch/mpi_launch.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {
namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-./=:,+@%") == std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') quoted += "'\\''"; else quoted += c;
  }
  return quoted + "'";
}

}  // namespace

std::string find_mpirun() {
  if (const char* env = std::getenv("STRATA_MPIRUN"); env != nullptr && executable(env)) return env;
#if defined(STRATA_RT_MPIEXEC)
  if (executable(STRATA_RT_MPIEXEC)) return STRATA_RT_MPIEXEC;
#endif
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/mpirun";
      if (executable(candidate)) return candidate;
    }
  }
  return "";
}

std::vector<std::string> mpirun_argv(const std::string& mpirun, int ranks,
                                     const std::vector<std::string>& command) {
  if (ranks < 1) throw InternalError(fmt::format("mpirun_argv: {} ranks", ranks));
  if (command.empty()) throw InternalError("mpirun_argv: empty command");
  std::vector<std::string> argv = {mpirun, "-n", std::to_string(ranks)};
  for (std::string& flag : mpirun_flags()) argv.push_back(std::move(flag));
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::string mpirun_shell_command(const std::string& mpirun, int ranks,
                                 const std::vector<std::string>& command) {
  std::string line = "env";
  for (const auto& [name, value] : mpirun_environment()) line += " " + name + "=" + shell_quote(value);
  for (const auto& word : mpirun_argv(mpirun, ranks, command)) {
    line += ' ';
    line += shell_quote(word);
  }
  return line;
}

}  // namespace strata::rt
