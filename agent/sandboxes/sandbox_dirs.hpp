#pragma once
// Directories of the persistent job sandboxes: private (0700) directories, removal that never
// follows a symlink a step planted, and where a broker's unix socket can live.

#include <filesystem>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace agent {

// A socket directory outside the state dir (when the state dir is too deep for a socket path)
// is named with this prefix; only such directories are removed as socket directories.
inline constexpr std::string_view k_short_socket_prefix = "/tmp/sandgate-sb-";

// Creates `dir` (and its parents) and makes it owner-only; permanent on failure.
common::Expected<void> make_private_dir(const std::filesystem::path& dir);

// Removes a tree without following symlinks (a symlink is unlinked, never its target); read-only
// directories a step left are made writable first. Failures are logged, not returned.
void remove_tree(const std::filesystem::path& dir);

// At most 64 KiB of a small file; empty when it cannot be read.
std::string read_small_file(const std::filesystem::path& path);

// Where the broker socket of the sandbox in `box_dir` goes: box_dir/sock when
// box_dir/sock/broker.sock fits a sockaddr_un, else a new private k_short_socket_prefix*
// directory (the caller removes it with the sandbox).
common::Expected<std::filesystem::path> socket_dir_for(const std::filesystem::path& box_dir);

}  // namespace agent
