#pragma once
// File commands: the GITHUB_ENV, GITHUB_OUTPUT, GITHUB_PATH, GITHUB_STATE and
// GITHUB_STEP_SUMMARY files a step writes, created empty before it runs and read after, the
// way actions/runner does (src/Runner.Worker/FileCommandManager.cs, EnvFileKeyValuePairs):
//  - env/output/state files hold `NAME=value` lines (split at the first `=`, unless a `<<`
//    comes first) and `NAME<<DELIM` heredocs: the value is every line up to the first line
//    exactly equal to DELIM (ordinal), without the newline before DELIM; empty lines between
//    entries are skipped;
//  - errors (a line that is neither form, an empty name or delimiter, a heredoc whose
//    delimiter never comes, a value line without a newline at end of file) name the file and
//    the 1-based line: `GITHUB_OUTPUT:3: ...`;
//  - a line may end in CRLF: the CR is part of the line ending, not of the name, value or
//    delimiter (the runner's Windows rule, applied everywhere so CRLF scripts behave);
//  - the path file holds one directory per non-empty line;
//  - the summary may be at most k_max_summary_bytes (GitHub's 1 MiB); a larger one is
//    dropped with the runner's error.
// A file that fails to parse contributes nothing (all-or-nothing), and the step fails.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "jobs/run/workflow_commands.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/process/run.hpp"

namespace jobs {

inline constexpr std::size_t k_max_summary_bytes = 1024 * 1024;

struct FileCommandPaths {
    std::filesystem::path env;      // GITHUB_ENV
    std::filesystem::path output;   // GITHUB_OUTPUT
    std::filesystem::path path;     // GITHUB_PATH
    std::filesystem::path state;    // GITHUB_STATE
    std::filesystem::path summary;  // GITHUB_STEP_SUMMARY
};

// GITHUB_ENV=..., GITHUB_OUTPUT=..., GITHUB_PATH=..., GITHUB_STATE=..., GITHUB_STEP_SUMMARY=...
sandbox::Environment file_command_environment(const FileCommandPaths& paths);

// Parses the key/value format. `label` names the file in errors (e.g. "GITHUB_ENV").
// Duplicated names: later values replace earlier ones, keeping the first position.
common::Expected<NamedValues> parse_key_value_text(std::string_view text, std::string_view label);

// The directories of a GITHUB_PATH file, in file order.
std::vector<std::string> parse_path_text(std::string_view text);

// What the files of one step said. Values are raw (unmasked).
struct FileCommandResults {
    NamedValues env;
    NamedValues outputs;
    NamedValues state;
    std::vector<std::string> path;
    std::string summary;                  // empty when none was written or it was dropped
    std::vector<Annotation> annotations;  // runner-style errors (unmasked; the caller masks)
    std::vector<std::string> failures;    // errors that fail the step
};

// Files a step writes are read with a byte cap each (beyond it the step fails, the file is not
// read): the summary's is GitHub's, the others' this.
inline constexpr std::size_t k_max_file_command_bytes = 16 * 1024 * 1024;

// The five files of one step, in a directory the trusted side opened itself (safe_access.hpp):
// created fresh (O_EXCL) through its fd before the step, read through it afterwards (regular
// files only, within the caps; a symlink, FIFO, device or directory planted in a file's place
// fails the step with "$GITHUB_ENV is not a regular file"), removed through it at the end.
// A directory swapped for another after the step started changes nothing: the fd still names
// the one created. Move-only; the destructor removes the files.
class FileCommandFiles {
public:
    // Creates the directory `relative` beneath `root` when missing (an existing one must be a
    // real directory) and five new empty files in it with a unique suffix; `options` gives
    // their mode and owner (the sandbox's host identity, which must write them).
    static common::Expected<FileCommandFiles> create(const sandbox::SafeDir& root,
                                                     std::string_view relative,
                                                     const sandbox::CreateOptions& options);
    FileCommandFiles(FileCommandFiles&&) noexcept = default;
    FileCommandFiles& operator=(FileCommandFiles&&) noexcept = default;
    ~FileCommandFiles();

    const FileCommandPaths& paths() const { return m_paths; }
    // Reads and parses all five files. A missing file counts as empty. NODE_OPTIONS written to
    // GITHUB_ENV is refused with the runner's error annotation.
    FileCommandResults read() const;
    // Removes the five files (through the directory fd); idempotent.
    void remove();

private:
    FileCommandFiles() = default;
    sandbox::SafeDir m_dir;
    FileCommandPaths m_paths;
    std::string m_suffix;
};

// The runner's PrependPath list: add() moves an existing entry to the end; the PATH a step
// sees is the entries newest first, then the base PATH.
class PathPrepends {
public:
    void add(const std::string& dir);
    std::string apply(std::string_view base_path) const;
    const std::vector<std::string>& entries() const { return m_entries; }

private:
    std::vector<std::string> m_entries;
};

}  // namespace jobs
