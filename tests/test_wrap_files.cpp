// sandbox/wrap_files: the sealed memfds shared by every plan of a process, and the cached
// contents of host files, re-read when a file changes.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "sandbox/wrap_files.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

std::string read_all(int fd) {
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
    return text;
}

std::size_t open_fds() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
    return count;
}

}  // namespace

TEST_CASE("one content, many readers: each fd reads all of it from offset 0, none can write") {
    const std::string content(100000, 'e');
    auto first = sandbox::sealed_content_fd("test", content);
    auto second = sandbox::sealed_content_fd("test", content);
    REQUIRE(first);
    REQUIRE(second);
    CHECK(read_all(first->get()) == content);
    CHECK(read_all(second->get()) == content);
    CHECK(::write(first->get(), "x", 1) == -1);
    CHECK((::fcntl(first->get(), F_GET_SEALS) & F_SEAL_WRITE) != 0);
    auto empty = sandbox::sealed_content_fd("test", "");
    REQUIRE(empty);
    CHECK(read_all(empty->get()).empty());
}

TEST_CASE("the shared memfds are bounded however many distinct contents a process hands out") {
    const std::size_t before = open_fds();
    for (int i = 0; i < 300; ++i) {
        auto fd = sandbox::sealed_content_fd("test", "content " + std::to_string(i));
        REQUIRE(fd);
        CHECK(read_all(fd->get()) == "content " + std::to_string(i));
    }
    CHECK(open_fds() <= before + 48);
}

TEST_CASE("file contents are cached until the file changes; missing, odd and large files are none") {
    const auto dir = tests::make_temp_dir("wrap-files");
    tests::write_file(dir / "file", "one");
    std::filesystem::create_symlink(dir / "file", dir / "link");
    CHECK(sandbox::cached_file_content(dir / "file", 1024) == "one");
    CHECK(sandbox::cached_file_content(dir / "link", 1024) == "one");
    tests::write_file(dir / "file", "two, longer");
    CHECK(sandbox::cached_file_content(dir / "file", 1024) == "two, longer");
    CHECK(sandbox::cached_file_content(dir / "link", 1024) == "two, longer");
    // Replaced by another file (a new inode) of the same size: read again too.
    tests::write_file(dir / "other", "six, longer");
    std::filesystem::rename(dir / "other", dir / "file");
    CHECK(sandbox::cached_file_content(dir / "file", 1024) == "six, longer");
    CHECK_FALSE(sandbox::cached_file_content(dir / "file", 4));
    CHECK_FALSE(sandbox::cached_file_content(dir / "absent", 1024));
    CHECK_FALSE(sandbox::cached_file_content(dir, 1024));
    tests::write_file(dir / "empty", "");
    CHECK(sandbox::cached_file_content(dir / "empty", 1024) == "");
}
