// agent/random_id: the ids the agent hands out.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "agent/cli/random_id.hpp"

TEST_CASE("an id is the prefix and 2 hex digits per random byte, different every time") {
    std::set<std::string> seen;
    for (int i = 0; i < 200; ++i) {
        auto id = agent::random_id("sb-", 8);
        REQUIRE(id);
        REQUIRE(id->size() == 3 + 16);
        CHECK(id->starts_with("sb-"));
        CHECK(id->find_first_not_of("0123456789abcdef", 3) == std::string::npos);
        seen.insert(*id);
    }
    CHECK(seen.size() == 200);  // 64 random bits: a repeat would be a broken source
    auto bare = agent::random_id("", 16);
    REQUIRE(bare);
    CHECK(bare->size() == 32);
    auto none = agent::random_id("x-", 0);
    REQUIRE(none);
    CHECK(*none == "x-");
}
