#pragma once
// SHA-256 of a byte string, with nettle rather than OpenSSL: the agent daemon uses it (mirror
// scope names, bearer-token comparison) and must not load libcrypto
// (tests/unit/agent/test_agent.cpp checks its DT_NEEDED). Pure functions; no errors.

#include <nettle/sha2.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace common {

inline constexpr std::size_t k_sha256_size = 32;
using Sha256Digest = std::array<std::uint8_t, k_sha256_size>;

// The raw digest.
Sha256Digest sha256(std::string_view bytes);
// The digest in lower-case hex (64 characters).
std::string sha256_hex(std::string_view bytes);
std::string to_hex(const Sha256Digest& digest);

// A digest over bytes given in pieces.
class Sha256Stream {
public:
    Sha256Stream() { sha256_init(&m_context); }
    void update(std::string_view bytes);
    // The digest in lower-case hex; the stream starts over.
    std::string hex();

private:
    sha256_ctx m_context{};
};

}  // namespace common
