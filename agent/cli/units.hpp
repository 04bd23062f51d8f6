#pragma once
// Values people type on command lines and in workflow files: durations and byte sizes.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"

namespace agent {

// "90s", "5m", "1h", "1h30m", "250ms", "1.5s"; a bare number is seconds. Units: ms, s, m, h.
// invalid_input (message naming the text) for anything else, a negative value or overflow.
common::Expected<std::chrono::milliseconds> parse_duration(std::string_view text);

// "262144", "256K", "256KiB", "64M", "2G", "1T" (binary multiples; "KB" etc. are the same
// binary multiples, as in GNU tools' `--block-size`). invalid_input otherwise or on overflow.
common::Expected<std::uint64_t> parse_bytes(std::string_view text);

}  // namespace agent
