#pragma once
// Read-only files handed to bwrap through fds (`--file FD`, `--seccomp FD`): the generated
// /etc, the offline configuration, the seccomp program. Most are the same from run to run, so
// each distinct content is written once per process into a sealed memfd, and every run gets
// its own read-only open file description of it (its own offset: bwrap reads to EOF, and runs
// may be planned concurrently). No copy, no memfd_create per run.
//
// Also: the contents of small host files under /etc, cached per process and re-read whenever
// the file's identity (device, inode, size, mtime) changes.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/error.hpp"
#include "sandbox/fd.hpp"

namespace sandbox {

// A new memfd at offset 0 holding exactly `content`, sealed so that it can never change
// (F_SEAL_WRITE...); not cached (for content used once, such as bwrap's --args). Owned by the
// caller; `name` labels the memfd.
Expected<Fd> sealed_memfd(std::string_view name, std::string_view content);

// An fd at offset 0 reading exactly `content`, which can never change (F_SEAL_WRITE...).
// The caller owns the returned fd; the cache keeps its own. `name` labels the memfd.
Expected<Fd> sealed_content_fd(std::string_view name, std::string_view content);

// The content of the regular file at `path` (symlinks followed), or nullopt when it is
// missing, not a regular file, larger than `max_size` or unreadable.
std::optional<std::string> cached_file_content(const std::filesystem::path& path,
                                               std::uintmax_t max_size);

}  // namespace sandbox
