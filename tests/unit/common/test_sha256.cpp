// common/sha256.hpp against the FIPS 180-2 test vectors.
#include <catch2/catch.hpp>

#include "common/sha256.hpp"

TEST_CASE("sha256: the FIPS 180-2 vectors, raw and in hex") {
    CHECK(common::sha256_hex("") ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(common::sha256_hex("abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(common::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const auto raw = common::sha256("abc");
    CHECK(raw.front() == 0xba);
    CHECK(raw.back() == 0xad);
    CHECK(common::sha256(std::string("a\0b", 3)) != common::sha256("a"));  // bytes, not C strings
}
