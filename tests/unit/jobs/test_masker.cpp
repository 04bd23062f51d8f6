#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "jobs/run/masker.hpp"

using jobs::LineSplitter;
using jobs::Masker;

TEST_CASE("the empty and whitespace-only values are never registered") {
    Masker masker;
    CHECK_FALSE(masker.add_secret(""));
    CHECK_FALSE(masker.add_secret("  \t\n"));
    CHECK(masker.size() == 0);
    CHECK(masker.mask("plain text") == "plain text");
}

TEST_CASE("a secret is masked wherever it appears, trimmed, and overlaps merge") {
    Masker masker;
    REQUIRE(masker.add_secret("  hunter2  "));
    CHECK(masker.mask("pw=hunter2 and hunter2!") == "pw=*** and ***!");
    CHECK(masker.mask("hunter2hunter2") == "***");  // adjacent ranges merge
    masker.add_secret("abcdef");
    masker.add_secret("defghi");
    CHECK(masker.mask("xabcdefghiy") == "x***y");  // overlapping ranges merge
    CHECK(masker.contains_secret("a hunter2 b"));
    CHECK_FALSE(masker.contains_secret("hunter"));
}

TEST_CASE("each line of a multi-line secret is masked on its own; short lines are not") {
    Masker masker;
    masker.add_secret("{\n  \"key\": \"line-one-value\",\r\n  \"other\": \"second\"\n}");
    CHECK(masker.mask("\"key\": \"line-one-value\",") == "***");
    CHECK(masker.mask("got   \"other\": \"second\" here") == "got   *** here");
    CHECK(masker.mask("{ a } b }") == "{ a } b }");  // a lone brace is not a secret
}

TEST_CASE("common encodings of a secret are masked too") {
    Masker masker;
    masker.add_secret("p@ss word\"x");
    CHECK(masker.mask("json: \"p@ss word\\\"x\"") == "json: \"***\"");
    CHECK(masker.mask("url: p%40ss%20word%22x") == "url: ***");
    // base64("p@ss word\"x") = cEBzcyB3b3JkIng= ; the stable prefix is masked.
    const auto masked = masker.mask("b64: cEBzcyB3b3JkIng=");
    CHECK(masked.find("cEBzcyB3b3Jk") == std::string::npos);
}

namespace {

std::string base64(std::string_view text) {
    static constexpr char k_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 3 <= text.size(); i += 3) {
        const unsigned n = (static_cast<unsigned char>(text[i]) << 16) |
                           (static_cast<unsigned char>(text[i + 1]) << 8) |
                           static_cast<unsigned char>(text[i + 2]);
        for (int shift = 18; shift >= 0; shift -= 6) out += k_alphabet[(n >> shift) & 63];
    }
    if (i < text.size()) {
        unsigned n = static_cast<unsigned char>(text[i]) << 16;
        if (i + 1 < text.size()) n |= static_cast<unsigned char>(text[i + 1]) << 8;
        out += k_alphabet[(n >> 18) & 63];
        out += k_alphabet[(n >> 12) & 63];
        out += i + 1 < text.size() ? k_alphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

}  // namespace

TEST_CASE("base64 of a secret is masked at every alignment, as in Basic auth (user:SECRET)") {
    const std::string secret = "s3cr3t-T0ken-value";
    Masker masker;
    masker.add_secret(secret);
    // Any prefix length: the secret starts at each of the three byte offsets of a group.
    for (const std::string prefix : {"", "u", "us", "user:", "admin:", "x-access-token:"}) {
        const auto encoded = base64(prefix + secret + "@trailing");
        const auto masked = masker.mask("Authorization: Basic " + encoded);
        INFO(prefix << " -> " << encoded << " -> " << masked);
        CHECK(masked.find("***") != std::string::npos);
        // At most the few characters that mix secret bits with the prefix's or suffix's stay.
        const auto kept = masked.size() - std::string("Authorization: Basic ***").size();
        CHECK(kept <= base64(prefix).size() + base64("@trailing").size() + 4);
    }
}

TEST_CASE("the runner's other encodings and the shell-quoted forms are masked") {
    Masker masker;
    masker.add_secret("it's a \"<secret>\" & more");
    CHECK(masker.mask("xml: it&apos;s a &quot;&lt;secret&gt;&quot; &amp; more") == "xml: ***");
    CHECK(masker.mask("cmd: it's a \\\"<secret>\\\" & more") == "cmd: ***");
    CHECK(masker.mask("expr: 'it''s a \"<secret>\" & more'") == "expr: '***'");
    CHECK(masker.mask("set -x: 'it'\\''s a \"<secret>\" & more'") == "set -x: '***'");
    CHECK(masker.mask("printf %q: it\\'s\\ a\\ \\\"\\<secret\\>\\\"\\ \\&\\ more") ==
          "printf %q: ***");
    CHECK(masker.mask("json: \"it's a \\\"<secret>\\\" & more\"") == "json: \"***\"");
    CHECK(masker.mask("url: it%27s%20a%20%22%3Csecret%3E%22%20%26%20more") == "url: ***");
    Masker quoted;
    quoted.add_secret("\"quoted-value\"");
    CHECK(quoted.mask("bare: quoted-value") == "bare: ***");  // TrimDoubleQuotes
}

TEST_CASE("the line splitter reassembles lines split at arbitrary points") {
    Masker masker;
    masker.add_secret("s3cr3t-value");
    const std::string stream = "first line\r\nthe s3cr3t-value is here\nlast without newline";
    for (std::size_t step = 1; step <= stream.size(); ++step) {
        std::vector<std::string> lines;
        LineSplitter splitter([&](std::string_view line) { lines.push_back(masker.mask(line)); });
        for (std::size_t at = 0; at < stream.size(); at += step) {
            splitter.feed(std::string_view(stream).substr(at, step));
        }
        splitter.flush();
        REQUIRE(lines ==
                std::vector<std::string>{"first line", "the *** is here", "last without newline"});
    }
}

TEST_CASE("over-long lines are delivered in bounded pieces") {
    std::vector<std::string> lines;
    LineSplitter splitter([&](std::string_view line) { lines.emplace_back(line); }, 4);
    splitter.feed("abcdefghij\nxy");
    splitter.flush();
    CHECK(lines == std::vector<std::string>{"abcd", "efgh", "ij", "xy"});
}

TEST_CASE("a secret added later applies from then on") {
    Masker masker;
    CHECK(masker.mask("token-12345") == "token-12345");
    masker.add_secret("token-12345");
    CHECK(masker.mask("token-12345") == "***");
}

TEST_CASE("adding and masking from several threads is safe") {
    Masker masker;
    std::vector<std::thread> threads;
    std::atomic<int> leaks{0};
    threads.emplace_back([&] {
        for (int i = 0; i < 500; ++i) masker.add_secret("secret-number-" + std::to_string(i));
    });
    for (int t = 0; t < 3; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 2000; ++i) {
                // Either before or after the secret was added; never a torn result.
                const auto masked = masker.mask("value secret-number-0 and more");
                if (masked != "value secret-number-0 and more" && masked != "value *** and more") {
                    ++leaks;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(leaks == 0);
    CHECK(masker.mask("secret-number-499") == "***");
}

namespace {

// Hands out a new token at each call, as an installation token source does once the cached
// one is near its expiry.
class RotatingTokens final : public common::TokenProvider {
public:
    common::Expected<std::string> token() override {
        return "ghs_rotated" + std::to_string(++m_count);
    }
    common::Renewal refused(std::string_view) override { return common::Renewal::minted; }

private:
    int m_count = 0;
};

}  // namespace

TEST_CASE("every token a provider hands out is masked, the refreshed ones too") {
    jobs::Masker masker;
    jobs::MaskedTokens tokens(std::make_shared<RotatingTokens>(), masker);
    CHECK(masker.mask("ghs_rotated1 ghs_rotated2") == "ghs_rotated1 ghs_rotated2");
    CHECK(tokens.token().value() == "ghs_rotated1");
    CHECK(tokens.refused("ghs_rotated1") == common::Renewal::minted);
    CHECK(tokens.token().value() == "ghs_rotated2");
    CHECK(masker.mask("a ghs_rotated1 b ghs_rotated2 c") == "a *** b *** c");
}
