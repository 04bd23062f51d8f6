#pragma once
// SHA-256 of a byte string, with nettle rather than OpenSSL: the agent daemon uses it (mirror
// scope names, bearer-token comparison) and must not load libcrypto (tests/test_agent.cpp
// checks its DT_NEEDED). Pure functions; no errors.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace jobs {

inline constexpr std::size_t k_sha256_size = 32;
using Sha256Digest = std::array<std::uint8_t, k_sha256_size>;

// The raw digest.
Sha256Digest sha256(std::string_view bytes);
// The digest in lower-case hex (64 characters).
std::string sha256_hex(std::string_view bytes);

}  // namespace jobs
