#pragma once
// The one lookup of the host's temporary directory, and fresh directories in it, for the
// trusted side's own scratch (a run's temp root, a wrap's host-side scratch, libgit2's
// config file). $TMPDIR counts only when it is an absolute path: a relative one would make
// the place depend on the current directory.

#include <filesystem>
#include <string_view>

#include "common/error.hpp"

namespace common {

// $TMPDIR when it is absolute, else /tmp.
std::filesystem::path host_temp_dir();

// A new directory <host_temp_dir()>/<prefix>XXXXXX, mode 0700 (mkdtemp). Fails
// `unavailable` with the path and errno.
Expected<std::filesystem::path> make_host_temp_dir(std::string_view prefix);

}  // namespace common
