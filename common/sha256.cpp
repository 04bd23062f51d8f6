#include "common/sha256.hpp"

#include <nettle/sha2.h>

namespace common {

static_assert(k_sha256_size == SHA256_DIGEST_SIZE);

Sha256Digest sha256(std::string_view bytes) {
    sha256_ctx context;
    sha256_init(&context);
    sha256_update(&context, bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
    Sha256Digest digest;
    sha256_digest(&context, digest.size(), digest.data());
    return digest;
}

std::string to_hex(const Sha256Digest& digest) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * k_sha256_size);
    for (const std::uint8_t byte : digest) {
        out += k_hex[byte >> 4];
        out += k_hex[byte & 15];
    }
    return out;
}

std::string sha256_hex(std::string_view bytes) {
    return to_hex(sha256(bytes));
}

void Sha256Stream::update(std::string_view bytes) {
    sha256_update(&m_context, bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
}

std::string Sha256Stream::hex() {
    Sha256Digest digest;
    sha256_digest(&m_context, digest.size(), digest.data());
    return to_hex(digest);
}

}  // namespace common
