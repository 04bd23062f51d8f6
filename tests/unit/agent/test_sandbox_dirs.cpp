// Sandbox directories: private (0700), removed without following a symlink a step planted
// (its target survives), and a socket directory outside a state dir too deep for sockaddr_un.
#include <sys/stat.h>
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <string>

#include "agent/sandboxes/sandbox_dirs.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

TEST_CASE("sandbox dirs: a private directory is created with its parents, mode 0700") {
    const fs::path root = tests::make_temp_dir();
    REQUIRE(agent::make_private_dir(root / "a" / "b"));
    struct stat st {};
    REQUIRE(::stat((root / "a" / "b").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("sandbox dirs: removal never follows a planted symlink, and clears read-only dirs") {
    const fs::path root = tests::make_temp_dir();
    const fs::path outside = root / "outside";
    tests::write_file(outside / "precious.txt", "keep me");
    const fs::path box = root / "box";
    tests::write_file(box / "work" / "locked" / "file", "x");
    fs::create_directory_symlink(outside, box / "work" / "link");
    ::chmod((box / "work" / "locked").c_str(), 0500);
    agent::remove_tree(box);
    CHECK_FALSE(fs::exists(box));
    CHECK(tests::read_file(outside / "precious.txt") == "keep me");
}

TEST_CASE("sandbox dirs: the socket lives beside the box unless the path is too long") {
    const fs::path root = tests::make_temp_dir();
    auto near = agent::socket_dir_for(root / "sb-1");
    REQUIRE(near);
    CHECK(*near == root / "sb-1" / "sock");
    const fs::path deep = root / std::string(sizeof(sockaddr_un::sun_path), 'd');
    auto far = agent::socket_dir_for(deep);
    REQUIRE(far);
    CHECK(far->string().starts_with(agent::k_short_socket_prefix));
    struct stat st {};
    REQUIRE(::stat(far->c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    agent::remove_tree(*far);
}

TEST_CASE("sandbox dirs: a small file is read whole; a missing one is empty") {
    const fs::path root = tests::make_temp_dir();
    tests::write_file(root / "meta.json", "{\"id\":\"sb-1\"}");
    CHECK(agent::read_small_file(root / "meta.json") == "{\"id\":\"sb-1\"}");
    CHECK(agent::read_small_file(root / "none").empty());
}
