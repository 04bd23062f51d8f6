#include "github/webhook.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cctype>

namespace github {
namespace {

constexpr std::string_view k_prefix = "sha256=";
constexpr size_t k_digest_bytes = 32;

std::array<unsigned char, k_digest_bytes> hmac_sha256(std::string_view secret,
                                                      std::string_view body) {
    std::array<unsigned char, k_digest_bytes> digest{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest.data(), &length);
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
    return CRYPTO_memcmp(expected.data(), received.data(), k_digest_bytes) == 0
               ? SignatureCheck::valid
               : SignatureCheck::invalid;
}

}  // namespace github
