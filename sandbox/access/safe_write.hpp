#pragma once
// Two more pieces of the safe-access module (sandbox/access/safe_access.hpp; defined in
// safe_access.cpp) for callers that stream: a fresh file beneath a SafeDir to write into in
// chunks, and the check of a read's limits between chunks.

#include <string>
#include <string_view>

#include "sandbox/access/safe_access.hpp"

namespace sandbox {

// A new empty file beneath `dir`, open for writing (O_CREAT | O_EXCL through the dirfd, as
// SafeDir::create_file: an existing entry, link or not, is invalid_input "<label> exists
// already"), given to options.owner when set.
Expected<Fd> create_new_file(const SafeDir& dir, std::string_view relative,
                             const CreateOptions& options, const std::string& label);

// Whether `limits`' deadline has passed or its token fired.
bool read_limits_expired(const ReadLimits& limits);

}  // namespace sandbox
