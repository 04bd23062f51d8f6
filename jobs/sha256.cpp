#include "jobs/sha256.hpp"

#include <nettle/sha2.h>

namespace jobs {

static_assert(k_sha256_size == SHA256_DIGEST_SIZE);

Sha256Digest sha256(std::string_view bytes) {
    sha256_ctx context;
    sha256_init(&context);
    sha256_update(&context, bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
    Sha256Digest digest;
    sha256_digest(&context, digest.size(), digest.data());
    return digest;
}

std::string sha256_hex(std::string_view bytes) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * k_sha256_size);
    for (const std::uint8_t byte : sha256(bytes)) {
        out += k_hex[byte >> 4];
        out += k_hex[byte & 15];
    }
    return out;
}

}  // namespace jobs
