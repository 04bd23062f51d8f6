// common/temp_dir.hpp: the host's temporary directory and fresh directories in it.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "common/temp_dir.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("the host's temp dir is an absolute $TMPDIR, else /tmp") {
    const auto dir = tests::make_temp_dir("tempdir");
    {
        tests::ScopedEnv set("TMPDIR", dir.string());
        CHECK(common::host_temp_dir() == dir);
    }
    {
        tests::ScopedEnv relative("TMPDIR", "relative/tmp");
        CHECK(common::host_temp_dir() == "/tmp");
    }
    {
        tests::ScopedEnv empty("TMPDIR", "");
        CHECK(common::host_temp_dir() == "/tmp");
    }
}

TEST_CASE("a fresh temp dir is new, private and named by its prefix") {
    const auto dir = tests::make_temp_dir("tempdir");
    tests::ScopedEnv set("TMPDIR", dir.string());
    auto first = common::make_host_temp_dir("sandgate-test-");
    auto second = common::make_host_temp_dir("sandgate-test-");
    REQUIRE(first);
    REQUIRE(second);
    CHECK(*first != *second);
    CHECK(first->parent_path() == dir);
    CHECK(first->filename().string().starts_with("sandgate-test-"));
    struct stat info {};
    REQUIRE(::stat(first->c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0700);
}

TEST_CASE("a temp dir that cannot be made is one error naming the place") {
    const auto dir = tests::make_temp_dir("tempdir");
    const auto missing = dir / "missing";
    tests::ScopedEnv set("TMPDIR", missing.string());
    auto made = common::make_host_temp_dir("sandgate-test-");
    REQUIRE_FALSE(made);
    CHECK(made.error().kind == common::ErrorKind::unavailable);
    CHECK(made.error().message.find(missing.string()) != std::string::npos);
}
