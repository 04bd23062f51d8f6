// common/strings.hpp: the one trim and ASCII case-insensitive compare.
#include <catch2/catch.hpp>

#include "common/strings.hpp"

TEST_CASE("trim strips ASCII white space at both ends only") {
    CHECK(common::trim("  a b\t\r\n") == "a b");
    CHECK(common::trim("\f\vx\v") == "x");
    CHECK(common::trim(" \t ").empty());
    CHECK(common::trim("").empty());
    // A non-breaking space (UTF-8 C2 A0) is not ASCII white space: kept.
    CHECK(common::trim("\xc2\xa0x ") == "\xc2\xa0x");
}

TEST_CASE("ascii_iequals folds ASCII letters and compares every other byte exactly") {
    CHECK(common::ascii_iequals("Content-Type", "content-TYPE"));
    CHECK_FALSE(common::ascii_iequals("abc", "abcd"));
    CHECK_FALSE(common::ascii_iequals("a-b", "a_b"));
    // '@' and '`' sit next to 'A' and 'a' - 1: not letters, not folded.
    CHECK_FALSE(common::ascii_iequals("@", "`"));
    CHECK_FALSE(common::ascii_iequals("\xc3\x84", "\xc3\xa4"));  // Ä, ä: bytes differ
    CHECK(common::ascii_lowercase("NODE_Options-1") == "node_options-1");
}
