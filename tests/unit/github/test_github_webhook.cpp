// github/webhook: X-Hub-Signature-256 against the test vector in the OpenAPI corpus README.

#include <catch2/catch.hpp>

#include "github/webhook.hpp"
#include "tests/support/temp_dir.hpp"

namespace {
constexpr std::string_view k_secret = "It's a Secret to Everybody";
constexpr std::string_view k_body = "Hello, World!";
}  // namespace

TEST_CASE("the README's test vector signs and verifies") {
    // Read the vector from the corpus itself, so the test follows the documented value.
    const std::string readme =
        tests::read_file(std::string(SANDGATE_SHARED_DIR) + "/corpora/github-openapi/README.md");
    const std::string expected =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    REQUIRE(readme.find(expected) != std::string::npos);
    CHECK(github::webhook_signature(k_secret, k_body) == expected);
    CHECK(github::verify_webhook_signature(k_secret, k_body, expected) ==
          github::SignatureCheck::valid);
    std::string upper = expected;
    for (size_t i = 7; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
    CHECK(github::verify_webhook_signature(k_secret, k_body, upper) ==
          github::SignatureCheck::valid);
}

TEST_CASE("a wrong body, secret or header is refused") {
    const std::string good = github::webhook_signature(k_secret, k_body);
    CHECK(github::verify_webhook_signature(k_secret, "Hello, World?", good) ==
          github::SignatureCheck::invalid);
    CHECK(github::verify_webhook_signature("another secret", k_body, good) ==
          github::SignatureCheck::invalid);
    std::string flipped = good;
    flipped.back() = flipped.back() == '0' ? '1' : '0';
    CHECK(github::verify_webhook_signature(k_secret, k_body, flipped) ==
          github::SignatureCheck::invalid);
    CHECK(github::verify_webhook_signature(k_secret, k_body, "sha1=abc") ==
          github::SignatureCheck::malformed);
    CHECK(github::verify_webhook_signature(k_secret, k_body, good.substr(0, 70)) ==
          github::SignatureCheck::malformed);
    CHECK(github::verify_webhook_signature(k_secret, k_body, "sha256=" + std::string(64, 'z')) ==
          github::SignatureCheck::malformed);
}
