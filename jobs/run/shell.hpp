#pragma once
// The `shell:` of a run step, as actions/runner resolves it on Linux
// (src/Runner.Worker/Handlers/ScriptHandlerHelpers.cs, ScriptHandler.cs):
//   (unset)     bash -e {0} when bash is on PATH, else sh -e {0}
//   bash        bash --noprofile --norc -eo pipefail {0}
//   sh          sh -e {0}
//   python      python {0}  (python3 when there is no python on PATH)
//   pwsh        pwsh -command ". '{0}'"
//   powershell  powershell -command ". '{0}'"
//   anything else must be a template containing {0}: `perl {0}`, `bash -l {0}`, ...
// The template's first word is the program, the rest is split like a command line (spaces
// separate, double quotes group, backslash escapes a quote); {0} is replaced by the script
// path in every argument. The script is written to `<temp dir>/<random>.<ext>` (.sh, .py,
// .ps1, none for custom shells), with the runner's PowerShell preamble/epilogue.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {

struct ShellTemplate {
    std::string program;            // as resolved on PATH (an absolute path when found)
    std::vector<std::string> args;  // with {0} placeholders
    std::string extension;          // ".sh", ".py", ".ps1" or ""
    std::string name;               // "bash", "sh", "python", "pwsh", "powershell" or "custom"
};

struct ShellCommand {
    std::vector<std::string> argv;
    std::filesystem::path script;  // the written file; the caller removes it when done
    std::string script_name;       // its name in the temp dir (for removal through the dirfd)
};

// Resolves `shell` against `path_env` (a PATH value). Errors: invalid_input for a custom
// shell without {0} or an empty template; unavailable when the program is not on PATH.
common::Expected<ShellTemplate> resolve_shell(std::string_view shell, std::string_view path_env);

// Resolves the shell, writes `script` (fixed up for the shell) as a new file (O_EXCL, through
// the directory fd: never through a link a step planted) into `temp_dir`, owned as `options`
// says, and returns the argv that runs it.
common::Expected<ShellCommand> prepare_script(std::string_view shell, std::string_view script,
                                              const sandbox::SafeDir& temp_dir,
                                              const sandbox::CreateOptions& options,
                                              std::string_view path_env);

// Searches `path_env` for an executable regular file named `program` (returned as is when
// it contains a slash and is executable). Empty when not found.
std::filesystem::path find_program(std::string_view program, std::string_view path_env);

// Splits a template's argument part the way the runner's process invoker does.
std::vector<std::string> split_arguments(std::string_view text);

}  // namespace jobs
