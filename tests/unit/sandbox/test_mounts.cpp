// The mount layout's helpers (sandbox/wrap/mounts.cpp): bind paths checked and normalised, host
// roots refused, parents mounted before children, visibility through the layout.
#include <catch2/catch.hpp>
#include <filesystem>

#include "sandbox/wrap/mounts.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("checked_bind_path normalises and refuses missing paths when asked") {
    const auto dir = tests::make_temp_dir("wrap");
    auto ok = sandbox::checked_bind_path(dir / "." / "", "--x", sandbox::MustExist::yes);
    REQUIRE(ok);
    CHECK(*ok == dir);
    CHECK_FALSE(sandbox::checked_bind_path(dir / "nope", "--x", sandbox::MustExist::yes));
    CHECK(sandbox::checked_bind_path(dir / "nope", "--x", sandbox::MustExist::no));
}

TEST_CASE("checked_bind_path refuses a path through a symlink") {
    const auto dir = tests::make_temp_dir("mounts");
    std::filesystem::create_directory(dir / "real");
    std::filesystem::create_directory_symlink(dir / "real", dir / "link");
    auto through = sandbox::checked_bind_path(dir / "link", "--writable", sandbox::MustExist::yes);
    REQUIRE_FALSE(through);
    CHECK(through.error().kind == common::ErrorKind::invalid_input);
    CHECK(through.error().message.find("--writable") != std::string::npos);
}

TEST_CASE(
    "refuse_host_roots refuses the host's shared and system trees, and anything holding them") {
    for (const char* path : {"/tmp", "/run", "/proc", "/etc", "/", "/var", "/dev/shm"}) {
        INFO(path);
        CHECK_FALSE(sandbox::refuse_host_roots(path, "--read-only"));
    }
    auto refused = sandbox::refuse_host_roots("/var", "--writable");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("--writable /var: would expose /var/tmp") == 0);
    // A project directory (here a test's temp dir) is fine.
    CHECK(sandbox::refuse_host_roots(tests::make_temp_dir("mounts"), "--cwd"));
}

TEST_CASE("order_mounts puts parents first; visible_inside follows the deepest entry") {
    using sandbox::MountKind;
    std::vector<sandbox::MountEntry> entries = {
        {MountKind::hide_dir, "/work/repo/.secrets", {}, {}, 1},
        {MountKind::bind, "/work/repo", "/work/repo", {}, 2},
        {MountKind::tmpfs, "/tmp", {}, {}, 0, 1 << 20},
        {MountKind::ro_bind, "/usr", "/usr", {}, 0},
    };
    sandbox::order_mounts(entries);
    const auto at = [&](const char* dest) {
        return std::find_if(entries.begin(), entries.end(),
                            [&](const auto& e) { return e.dest == dest; }) -
               entries.begin();
    };
    CHECK(at("/work/repo") < at("/work/repo/.secrets"));
    CHECK(sandbox::visible_inside(entries, "/work/repo/src/main.c"));
    CHECK(sandbox::visible_inside(entries, "/usr/bin/true"));
    CHECK_FALSE(sandbox::visible_inside(entries, "/work/repo/.secrets/key"));
    CHECK_FALSE(sandbox::visible_inside(entries, "/tmp/file"));
    CHECK_FALSE(sandbox::visible_inside(entries, "/home/user/.ssh/id_rsa"));
}

TEST_CASE("path_within compares components, whether or not the paths are written plainly") {
    using sandbox::path_within;
    CHECK(path_within("/usr/bin/true", "/usr"));
    CHECK(path_within("/usr", "/usr"));
    CHECK(path_within("/anything/at/all", "/"));
    CHECK(path_within("/", "/"));
    CHECK_FALSE(path_within("/usrx/bin", "/usr"));  // a longer name, not a child
    CHECK_FALSE(path_within("/usr", "/usr/bin"));
    CHECK_FALSE(path_within("/us", "/usr"));
    // Written with doubled or trailing separators: the same components.
    CHECK(path_within("/usr//bin/true", "/usr/bin"));
    CHECK(path_within("/usr/bin/", "/usr/bin"));
    CHECK(path_within("/usr/bin/true", "/usr/bin/"));
    CHECK_FALSE(path_within("/usrx//bin", "/usr/"));
}

TEST_CASE("order_mounts counts depth in components however a path is written") {
    using sandbox::MountKind;
    std::vector<sandbox::MountEntry> entries = {
        {MountKind::hide_dir, "/a/b/c", {}, {}, 1},
        {MountKind::bind, "/a//b", "/a/b", {}, 2},
        {MountKind::ro_bind, "/a/", "/a", {}, 0},
        {MountKind::tmpfs, "/", {}, {}, 0, 1 << 20},
    };
    sandbox::order_mounts(entries);
    REQUIRE(entries.size() == 4);
    CHECK(entries[0].dest == "/");
    CHECK(entries[1].dest == "/a/");
    CHECK(entries[2].dest == "/a//b");
    CHECK(entries[3].dest == "/a/b/c");
}
