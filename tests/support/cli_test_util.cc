#include "cli_test_util.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace strata::testing {
namespace fs = std::filesystem;

namespace {
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}
}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool file_exists(const std::string& path) { return fs::exists(path); }

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "strata-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = file(name);
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

namespace {
CommandResult run_command(std::string command, const std::vector<std::string>& args) {
  TempDir capture;
  for (const std::string& a : args) {
    command += ' ';
    command += shell_quote(a);
  }
  command += " >" + shell_quote(capture.file("out")) + " 2>" + shell_quote(capture.file("err")) +
             " </dev/null";
  int status = std::system(command.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(capture.file("out"));
  r.err = read_file(capture.file("err"));
  return r;
}
}  // namespace

CommandResult run_strata(const std::vector<std::string>& args) { return run_command(shell_quote(STRATA_BIN), args); }

CommandResult run_strata_after(const std::string& shell_setup, const std::vector<std::string>& args,
                               const std::string& launcher) {
  return run_command(shell_setup + "; exec " + launcher + " " + shell_quote(STRATA_BIN), args);
}

bool have_mpirun() { return !std::string(STRATA_MPIRUN).empty(); }

CommandResult run_strata_mpirun(int ranks, const std::vector<std::string>& args) {
  const std::string command = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                              shell_quote(STRATA_MPIRUN) + " -n " + std::to_string(ranks) +
                              " --oversubscribe --mca mpi_yield_when_idle 1"
                              " --mca btl_vader_single_copy_mechanism none " +
                              shell_quote(STRATA_BIN);
  return run_command(command, args);
}

}  // namespace strata::testing
