#pragma once
// Read-only files handed to bwrap through fds (`--file FD`, `--seccomp FD`): the generated
// /etc, the offline configuration, the seccomp program. Most are the same from run to run, so
// a content seen a second time is kept in a sealed memfd for the rest of the process: its
// user then gets a duplicate of the cache's fd (the one offset they share is never moved by
// the cache), every later one its own read-only open file description (its own offset: bwrap
// reads to EOF, and runs may be planned concurrently). No copy, no memfd_create per run. A
// content asked for once (every content of a one-shot `sandgate exec`) is not kept, nor
// sealed: its memfd is reachable only through the caller's fd, which goes to bwrap alone.
//
// Host files (the allowlisted part of /etc) are not copied at all: bwrap reads them from a
// read-only fd of the file itself.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/base.hpp"

namespace sandbox {

// A new memfd at offset 0 holding exactly `content`, not cached, for content used once (such
// as bwrap's --args). Owned by the caller, the only holder of the memfd: it is not sealed
// (nothing else can reach it to write), which spares a system call per file. `name` labels
// the memfd.
Expected<Fd> content_memfd(std::string_view name, std::string_view content);

// Writes `content` into `file` from offset 0 with pwrite, which leaves the file offset (shared
// with every duplicate, bwrap's among them) where it is. unavailable on a failed write.
Expected<void> write_contents(const Fd& file, std::string_view content);

// An fd at offset 0 reading exactly `content`. A content seen before comes from the cache's
// memfd, sealed so that it can never change (F_SEAL_WRITE...), through a read-only fd; a
// first sight is a content_memfd only the caller holds. The caller owns the returned fd; the
// cache keeps its own. `name` labels the memfd.
Expected<Fd> content_fd(std::string_view name, std::string_view content);

// Host files under /etc that the wrap shows as copies are at most this large.
constexpr std::uintmax_t k_max_host_file = 1 << 20;

// A read-only fd at offset 0 of the regular file at `path` (symlinks followed), for bwrap to
// copy from (`--file FD`); the caller owns it. invalid_input when it is not a regular file or
// is larger than `max_size`; unavailable when it cannot be opened. The check is made on the
// opened file (fstat), so a path swapped after a stat cannot hand over a fifo or a device.
Expected<Fd> open_host_file(const std::filesystem::path& path, std::uintmax_t max_size);

}  // namespace sandbox
