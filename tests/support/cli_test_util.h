// Running the strata executable from tests, as a user would.
#pragma once

#include <string>
#include <vector>

namespace strata::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `strata <args>` (each argument shell-quoted) and captures its output.
CommandResult run_strata(const std::vector<std::string>& args);

// Whether this build found mpirun (tests that need it skip otherwise).
bool have_mpirun();
// Runs `strata <args>` from a shell that first runs shell_setup (e.g. a
// `ulimit -f` that makes the disk look full), through launcher when one is given
// (e.g. "timeout 60", which turns a hang into exit 124).
CommandResult run_strata_after(const std::string& shell_setup, const std::vector<std::string>& args,
                               const std::string& launcher = "");
// Runs `mpirun -n ranks strata <args>` with the settings a container needs: root
// allowed, oversubscribed ranks yield their core, no single-copy shared memory
// (docs/runtime.md).
CommandResult run_strata_mpirun(int ranks, const std::vector<std::string>& args);

// A fresh temporary directory, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes a file under the directory and returns its path.
  std::string write(const std::string& name, const std::string& content) const;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace strata::testing
