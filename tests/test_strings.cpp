// sandbox/strings.hpp: the one trim and ASCII case-insensitive compare.
#include <catch2/catch.hpp>

#include "sandbox/strings.hpp"

TEST_CASE("trim strips ASCII white space at both ends only") {
    CHECK(sandbox::trim("  a b\t\r\n") == "a b");
    CHECK(sandbox::trim("\f\vx\v") == "x");
    CHECK(sandbox::trim(" \t ").empty());
    CHECK(sandbox::trim("").empty());
    // A non-breaking space (UTF-8 C2 A0) is not ASCII white space: kept.
    CHECK(sandbox::trim("\xc2\xa0x ") == "\xc2\xa0x");
}

TEST_CASE("ascii_iequals folds ASCII letters and compares every other byte exactly") {
    CHECK(sandbox::ascii_iequals("Content-Type", "content-TYPE"));
    CHECK_FALSE(sandbox::ascii_iequals("abc", "abcd"));
    CHECK_FALSE(sandbox::ascii_iequals("a-b", "a_b"));
    // '@' and '`' sit next to 'A' and 'a' - 1: not letters, not folded.
    CHECK_FALSE(sandbox::ascii_iequals("@", "`"));
    CHECK_FALSE(sandbox::ascii_iequals("\xc3\x84", "\xc3\xa4"));  // Ä, ä: bytes differ
    CHECK(sandbox::ascii_lowercase("NODE_Options-1") == "node_options-1");
}
