#include <catch2/catch.hpp>

#include "agent/cli/units.hpp"

using namespace std::chrono_literals;

TEST_CASE("durations") {
    CHECK(agent::parse_duration("90s").value() == 90s);
    CHECK(agent::parse_duration("5m").value() == 5min);
    CHECK(agent::parse_duration("1h").value() == 1h);
    CHECK(agent::parse_duration("1h30m").value() == 90min);
    CHECK(agent::parse_duration("250ms").value() == 250ms);
    CHECK(agent::parse_duration("1.5s").value() == 1500ms);
    CHECK(agent::parse_duration("7").value() == 7s);
    CHECK(agent::parse_duration("0s").value() == 0ms);
    for (const char* bad :
         {"", "s", "5 m", "-1s", "5x", "1h30", "1..5s", "5mm", "99999999999999999h"}) {
        INFO(bad);
        auto parsed = agent::parse_duration(bad);
        REQUIRE_FALSE(parsed);
        CHECK(parsed.error().kind == common::ErrorKind::invalid_input);
    }
}

TEST_CASE("byte sizes") {
    CHECK(agent::parse_bytes("262144").value() == 262144);
    CHECK(agent::parse_bytes("256K").value() == 262144);
    CHECK(agent::parse_bytes("256KiB").value() == 262144);
    CHECK(agent::parse_bytes("64m").value() == 64ull << 20);
    CHECK(agent::parse_bytes("2G").value() == 2ull << 30);
    CHECK(agent::parse_bytes("1T").value() == 1ull << 40);
    CHECK(agent::parse_bytes("0").value() == 0);
    for (const char* bad : {"", "K", "-5", "1.5M", "12Q", "99999999999999999999", "20000000000T"}) {
        INFO(bad);
        CHECK_FALSE(agent::parse_bytes(bad));
    }
}
