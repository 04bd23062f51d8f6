#pragma once
// Webhook signatures: X-Hub-Signature-256 is "sha256=" + hex(HMAC-SHA256(secret, raw body)).
// Verification compares in constant time (nettle's memeql_sec) and never logs the secret.
// Nettle, not OpenSSL: the agent daemon checks webhooks and must not load libcrypto (nettle
// is loaded anyway, by libmicrohttpd's GnuTLS).

#include <string>
#include <string_view>

namespace github {

// "sha256=<64 lower-case hex digits>".
std::string webhook_signature(std::string_view secret, std::string_view body);

enum class SignatureCheck { valid, invalid, malformed };

// Checks a received X-Hub-Signature-256 header value against the raw body. `malformed` when
// the header is not "sha256=" followed by 64 hex digits (upper-case hex is accepted).
SignatureCheck verify_webhook_signature(std::string_view secret, std::string_view body,
                                        std::string_view header);

}  // namespace github
