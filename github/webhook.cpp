#include "github/webhook.hpp"

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include <array>
#include <cctype>
#include <cstdint>

namespace github {
namespace {

constexpr std::string_view k_prefix = "sha256=";
constexpr size_t k_digest_bytes = 32;

std::array<unsigned char, k_digest_bytes> hmac_sha256(std::string_view secret,
                                                      std::string_view body) {
    static_assert(k_digest_bytes == SHA256_DIGEST_SIZE);
    std::array<unsigned char, k_digest_bytes> digest{};
    hmac_sha256_ctx context;
    hmac_sha256_set_key(&context, secret.size(),
                        reinterpret_cast<const std::uint8_t*>(secret.data()));
    hmac_sha256_update(&context, body.size(), reinterpret_cast<const std::uint8_t*>(body.data()));
    hmac_sha256_digest(&context, digest.size(), digest.data());
    return digest;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower >= 'a' && lower <= 'f') return lower - 'a' + 10;
    return -1;
}

}  // namespace

std::string webhook_signature(std::string_view secret, std::string_view body) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out(k_prefix);
    for (unsigned char byte : hmac_sha256(secret, body)) {
        out += k_hex[byte >> 4];
        out += k_hex[byte & 15];
    }
    return out;
}

SignatureCheck verify_webhook_signature(std::string_view secret, std::string_view body,
                                        std::string_view header) {
    if (!header.starts_with(k_prefix) || header.size() != k_prefix.size() + 2 * k_digest_bytes) {
        return SignatureCheck::malformed;
    }
    std::array<unsigned char, k_digest_bytes> received{};
    for (size_t i = 0; i < k_digest_bytes; ++i) {
        const int high = hex_value(header[k_prefix.size() + 2 * i]);
        const int low = hex_value(header[k_prefix.size() + 2 * i + 1]);
        if (high < 0 || low < 0) return SignatureCheck::malformed;
        received[i] = static_cast<unsigned char>(high * 16 + low);
    }
    const auto expected = hmac_sha256(secret, body);
    return memeql_sec(expected.data(), received.data(), k_digest_bytes) != 0
               ? SignatureCheck::valid
               : SignatureCheck::invalid;
}

}  // namespace github
