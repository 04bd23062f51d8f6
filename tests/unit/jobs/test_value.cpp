// The Value model: coercions, number formatting, case-insensitive objects, JSON both ways.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "jobs/expr/value.hpp"

using jobs::Value;

TEST_CASE("numbers print the way GitHub prints them") {
    using jobs::format_number;
    CHECK(format_number(0) == "0");
    CHECK(format_number(-0.0) == "0");
    CHECK(format_number(1) == "1");
    CHECK(format_number(-2) == "-2");
    CHECK(format_number(123.456) == "123.456");
    CHECK(format_number(0.1) == "0.1");
    CHECK(format_number(0.1 + 0.2) == "0.3");  // 15 decimals, then shortest digits
    CHECK(format_number(1.0 / 3) == "0.333333333333333");
    CHECK(format_number(1e-7) == "1e-7");
    CHECK(format_number(1e-16) == "0");  // below 15 decimals
    CHECK(format_number(1.5e-6) == "0.0000015");
    CHECK(format_number(123456789012345680000.0) == "123456789012345680000");
    CHECK(format_number(1e21) == "1e+21");
    CHECK(format_number(-1.5e300) == "-1.5e+300");
    CHECK(format_number(1.0 / 65536) == "0.000015258789063");  // half rounds up, like toFixed
    CHECK(format_number(std::nan("")) == "NaN");
    CHECK(format_number(INFINITY) == "Infinity");
    CHECK(format_number(-INFINITY) == "-Infinity");
}

TEST_CASE("strings convert to numbers like JavaScript's Number()") {
    using jobs::parse_number;
    CHECK(parse_number("") == 0);
    CHECK(parse_number("  \t\n") == 0);
    CHECK(parse_number(" 12 ") == 12);
    CHECK(parse_number("+1.2e2") == 120);
    CHECK(parse_number("-.5") == -0.5);
    CHECK(parse_number("5.") == 5);
    CHECK(parse_number("0xff") == 255);
    CHECK(parse_number("0o10") == 8);
    CHECK(parse_number("0b101") == 5);
    CHECK(parse_number("-Infinity") == -INFINITY);
    CHECK(parse_number("1e400") == INFINITY);
    CHECK(std::signbit(parse_number("-0")));
    CHECK(std::isnan(parse_number("-0x1")));
    CHECK(std::isnan(parse_number("1e")));
    CHECK(std::isnan(parse_number("abc")));
    CHECK(std::isnan(parse_number("inf")));
    CHECK(std::isnan(parse_number("1_000")));
    CHECK(std::isnan(parse_number(".")));
}

TEST_CASE("truthiness and string coercion") {
    CHECK_FALSE(Value().truthy());
    CHECK_FALSE(Value(0).truthy());
    CHECK_FALSE(Value(std::nan("")).truthy());
    CHECK_FALSE(Value("").truthy());
    CHECK(Value("0").truthy());
    CHECK(Value(jobs::Array{}).truthy());
    CHECK(Value(jobs::Object{}).truthy());
    CHECK(Value().to_display_string().empty());
    CHECK(Value(true).to_display_string() == "true");
    CHECK(Value(jobs::Array{}).to_display_string() == "Array");
    CHECK(Value(jobs::Object{}).to_display_string() == "Object");
    CHECK(std::isnan(Value(jobs::Object{}).to_number()));
    CHECK(Value(true).to_number() == 1);
}

TEST_CASE("objects keep insertion order and find keys case-insensitively") {
    jobs::Object object{{"Zeta", 1}, {"alpha", 2}};
    object.set("ZETA", 3);
    REQUIRE(object.size() == 2);
    CHECK(object.entries()[0].first == "Zeta");
    CHECK(object.find("zeta")->as_number() == 3);
    CHECK(object.find("ALPHA")->as_number() == 2);
    CHECK_FALSE(object.insert("Alpha", 9));
    CHECK(object.insert("beta", 4));
    CHECK(object.erase("BETA"));
    CHECK(object.find("beta") == nullptr);
    // Unicode case folding: final and non-final sigma fold together.
    CHECK(jobs::equals_ignore_case("ς_x", "Σ_X"));
    CHECK(jobs::equals_ignore_case("Über", "üBER"));
    CHECK_FALSE(jobs::equals_ignore_case("abc", "abd"));
}

TEST_CASE("large objects stay case-insensitive and ordered through their index") {
    jobs::Object object;
    for (int i = 0; i < 200; ++i) object.set("Key" + std::to_string(i), i);
    object.set("KEY7", 700);
    REQUIRE(object.size() == 200);
    CHECK(object.find("key7")->as_number() == 700);
    CHECK(object.entries()[7].first == "Key7");
    CHECK(object.find("kEy199")->as_number() == 199);
    CHECK(object.find("key200") == nullptr);
    CHECK(object.erase("KEY0"));
    CHECK(object.size() == 199);
    CHECK(object.find("key0") == nullptr);
    CHECK(object.find("key1")->as_number() == 1);
    CHECK(object.entries()[0].first == "Key1");
    CHECK_FALSE(object.insert("key5", 0));
    const jobs::Object copy = object;
    CHECK(copy.find("KEY150")->as_number() == 150);
    CHECK(Value(std::size_t{3}).as_number() == 3);
    CHECK(Value(-7L).as_number() == -7);
}

TEST_CASE("copies share containers; mutation copies on write") {
    Value first(jobs::Array{1, 2});
    Value second = first;
    CHECK(first.same_container(second));
    second.mutable_array().push_back(3);
    CHECK_FALSE(first.same_container(second));
    CHECK(first.as_array().size() == 2);
    CHECK(second.as_array().size() == 3);
    CHECK_FALSE(Value(jobs::Array{}).same_container(Value(jobs::Array{})));
}

TEST_CASE("JSON parses with simdjson and prints compact or GitHub-pretty") {
    auto parsed = jobs::parse_json(
        R"({"b": [1, 2.5, -0, true, null, "s\u00e9"], "a": {}, "c": 12345678901})");
    REQUIRE(parsed.has_value());
    CHECK(parsed->as_object().entries()[0].first == "b");
    CHECK(jobs::to_json(*parsed, jobs::JsonStyle::compact) ==
          R"({"b":[1,2.5,0,true,null,"sé"],"a":{},"c":12345678901})");
    CHECK(jobs::to_json(Value(jobs::Array{1, Value(jobs::Object{})}), jobs::JsonStyle::pretty) ==
          "[\n  1,\n  {}\n]");
    CHECK(jobs::to_json(Value(std::nan("")), jobs::JsonStyle::compact) == "null");
    CHECK(jobs::to_json(Value(std::ldexp(1.0, 60)), jobs::JsonStyle::compact) ==
          "1152921504606847000");
    CHECK(jobs::to_json(Value(-9007199254740993.0), jobs::JsonStyle::compact) ==
          "-9007199254740992");
    CHECK(jobs::to_json(Value(std::string("bad \xff byte")), jobs::JsonStyle::compact) ==
          "\"bad \xEF\xBF\xBD byte\"");
    auto duplicate = jobs::parse_json(R"({"k": 1, "K": 2})");
    REQUIRE(duplicate.has_value());
    CHECK(duplicate->as_object().size() == 1);
    CHECK(duplicate->get("k")->as_number() == 2);

    auto broken = jobs::parse_json("{\"a\": ");
    REQUIRE_FALSE(broken.has_value());
    CHECK(broken.error().kind == common::ErrorKind::invalid_input);
    CHECK_FALSE(jobs::parse_json("").has_value());
    CHECK_FALSE(jobs::parse_json("[1] 2").has_value());
    CHECK_FALSE(jobs::parse_json("7 x").has_value());
    CHECK_FALSE(jobs::parse_json("[1,]").has_value());
    CHECK_FALSE(jobs::parse_json("\"bad \xff\"").has_value());
    CHECK(jobs::parse_json(" 7 ")->as_number() == 7);
    CHECK(jobs::parse_json("\"s\"")->as_string() == "s");
    CHECK(jobs::parse_json("null")->is_null());
    // Integers beyond 64 bits are doubles, as in JavaScript's JSON.parse.
    CHECK(jobs::parse_json("[123456789012345680000]")->as_array()[0].as_number() ==
          1.2345678901234568e20);

    const Value round = jobs::from_ordered_json(jobs::to_ordered_json(*parsed));
    CHECK(deep_equal(round, *parsed));
}
