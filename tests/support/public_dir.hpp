#pragma once
// PublicDir: a directory under /tmp that every user may enter and write (for tests that run
// part of their work as an unprivileged uid such as 65534), removed at scope end.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <string_view>

namespace tests {

struct PublicDir {
    std::filesystem::path path;
    explicit PublicDir(std::string_view label) {
        std::string pattern = "/tmp/sandgate-test-" + std::string(label) + "-public-XXXXXX";
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
        std::filesystem::permissions(path, std::filesystem::perms::all);
    }
    PublicDir(const PublicDir&) = delete;
    PublicDir& operator=(const PublicDir&) = delete;
    ~PublicDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

}  // namespace tests
