#include <catch2/catch.hpp>
#include <cstdlib>

#include "agent/cli/assignments.hpp"

using agent::BareName;

TEST_CASE("NAME=VALUE: the value is everything after the first '='") {
    auto pair = agent::parse_assignment("A=b=c", "--env", BareName::refused);
    REQUIRE(pair);
    CHECK(pair->first == "A");
    CHECK(pair->second == "b=c");
    auto empty = agent::parse_assignment("A=", "--env", BareName::refused);
    REQUIRE(empty);
    CHECK(empty->second.empty());
}

TEST_CASE("NAME=VALUE: an empty name, or a bare one where refused, is one clear error") {
    for (const char* bad : {"=v", "", "NAME"}) {
        INFO(bad);
        auto pair = agent::parse_assignment(bad, "--var", BareName::refused);
        REQUIRE_FALSE(pair);
        CHECK(pair.error().kind == common::ErrorKind::invalid_input);
        CHECK(pair.error().message == std::string("--var ") + bad + ": expected NAME=VALUE");
    }
}

TEST_CASE("a bare NAME takes the environment's value, and says so when it is unset") {
    ::setenv("SANDGATE_TEST_ASSIGNMENT", "from-env", 1);
    auto set =
        agent::parse_assignment("SANDGATE_TEST_ASSIGNMENT", "-s", BareName::from_environment);
    REQUIRE(set);
    CHECK(set->second == "from-env");
    ::unsetenv("SANDGATE_TEST_ASSIGNMENT");
    auto unset =
        agent::parse_assignment("SANDGATE_TEST_ASSIGNMENT", "-s", BareName::from_environment);
    REQUIRE_FALSE(unset);
    CHECK(unset.error().message ==
          "-s SANDGATE_TEST_ASSIGNMENT: no value given and $SANDGATE_TEST_ASSIGNMENT is not set");
}

TEST_CASE("every value of an option, in order; the first bad one is the error") {
    auto pairs = agent::parse_assignments({"B=2", "A=1", "B=3"}, "--env", BareName::refused);
    REQUIRE(pairs);
    REQUIRE(pairs->size() == 3);
    CHECK((*pairs)[0] == agent::Assignment{"B", "2"});
    CHECK((*pairs)[2] == agent::Assignment{"B", "3"});
    auto bad = agent::parse_assignments({"A=1", "oops", "=x"}, "--env", BareName::refused);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "--env oops: expected NAME=VALUE");
}

TEST_CASE("an assignment option takes one value per occurrence, so '--' still ends options") {
    CLI::App app;
    std::vector<std::string> env;
    std::vector<std::string> argv;
    agent::add_assignment_option(app, "--env", env, "NAME=VALUE");
    app.add_option("argv", argv);
    const char* args[] = {"prog", "--env", "A=1", "--env", "B=2", "--", "--env", "C=3"};
    app.parse(8, args);
    CHECK(env == std::vector<std::string>{"A=1", "B=2"});
    CHECK(argv == std::vector<std::string>{"--env", "C=3"});
}
