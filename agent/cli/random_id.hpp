#pragma once
// Identifiers the agent hands out (sandbox ids, exec ids, runner-hook job ids): random bits
// from the kernel, as lowercase hex.

#include <cstddef>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace agent {

// `prefix` followed by 2 * `bytes` lowercase hex digits of getrandom(2) output (blocking
// until the kernel's pool is initialised, as it is long before any job). unavailable when
// the kernel gives fewer bytes; never a predictable fallback.
common::Expected<std::string> random_id(std::string_view prefix, std::size_t bytes);

}  // namespace agent
