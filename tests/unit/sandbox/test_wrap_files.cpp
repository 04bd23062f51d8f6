// sandbox/wrap_files: the memfds shared (sealed) by every plan of a process, and the read-only
// fds of host files handed to bwrap.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "sandbox/wrap/wrap_files.hpp"
#include "tests/support/read_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tests::read_to_eof;

std::size_t open_fds() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
        ++count;
    return count;
}

}  // namespace

TEST_CASE(
    "one content, many readers: each fd reads all of it from offset 0; a kept one is sealed") {
    const std::string content(100000, 'e');
    auto first = sandbox::content_fd("test", content);   // first sight: the caller's alone
    auto second = sandbox::content_fd("test", content);  // second: the cache's sealed memfd
    auto third = sandbox::content_fd("test", content);   // later: a read-only reopen of it
    REQUIRE(first);
    REQUIRE(second);
    REQUIRE(third);
    CHECK(read_to_eof(first->get()) == content);
    CHECK(read_to_eof(second->get()) == content);
    CHECK(read_to_eof(third->get()) == content);
    CHECK((::fcntl(second->get(), F_GET_SEALS) & F_SEAL_WRITE) != 0);
    CHECK(::write(second->get(), "x", 1) == -1);
    CHECK(::write(third->get(), "x", 1) == -1);
    // The first sight's memfd is reachable only through the caller's fd: it is not sealed.
    CHECK((::fcntl(first->get(), F_GET_SEALS) & F_SEAL_WRITE) == 0);
    auto empty = sandbox::content_fd("test", "");
    REQUIRE(empty);
    CHECK(read_to_eof(empty->get()).empty());
}

TEST_CASE("a content is kept from its second request on; one asked for once costs one fd") {
    const std::string content = "asked for once " + std::to_string(::getpid());
    const std::size_t before = open_fds();
    {
        auto once = sandbox::content_fd("test", content);
        REQUIRE(once);
        CHECK(open_fds() == before + 1);  // the caller's fd only: no copy kept
    }
    CHECK(open_fds() == before);
    auto again = sandbox::content_fd("test", content);
    REQUIRE(again);
    CHECK(open_fds() == before + 2);  // now the cache keeps one for later callers
    auto third = sandbox::content_fd("test", content);
    REQUIRE(third);
    CHECK(read_to_eof(third->get()) == content);
    CHECK(read_to_eof(again->get()) == content);
}

TEST_CASE("the shared memfds are bounded however many distinct contents a process hands out") {
    const std::size_t before = open_fds();
    for (int i = 0; i < 300; ++i) {
        auto fd = sandbox::content_fd("test", "content " + std::to_string(i));
        REQUIRE(fd);
        CHECK(read_to_eof(fd->get()) == "content " + std::to_string(i));
    }
    CHECK(open_fds() <= before + 48);
}

TEST_CASE(
    "host files are handed over as read-only fds of the file; odd and large files are refused") {
    const auto dir = tests::make_temp_dir("wrap-files");
    tests::write_file(dir / "file", "one");
    std::filesystem::create_symlink(dir / "file", dir / "link");
    for (const char* name : {"file", "link"}) {
        auto fd = sandbox::open_host_file(dir / name, 1024);
        REQUIRE(fd);
        CHECK(read_to_eof(fd->get()) == "one");
        CHECK(::write(fd->get(), "x", 1) == -1);  // read-only
        CHECK((::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC) != 0);
    }
    // Each call is a new open file description: its own offset at 0.
    auto first = sandbox::open_host_file(dir / "file", 1024);
    auto second = sandbox::open_host_file(dir / "file", 1024);
    REQUIRE(first);
    REQUIRE(second);
    CHECK(read_to_eof(first->get()) == "one");
    CHECK(read_to_eof(second->get()) == "one");
    tests::write_file(dir / "empty", "");
    auto empty = sandbox::open_host_file(dir / "empty", 1024);
    REQUIRE(empty);
    CHECK(read_to_eof(empty->get()).empty());

    const auto too_large = sandbox::open_host_file(dir / "file", 2);
    REQUIRE_FALSE(too_large);
    CHECK(too_large.error().kind == common::ErrorKind::invalid_input);
    CHECK_FALSE(sandbox::open_host_file(dir / "absent", 1024));
    const auto directory = sandbox::open_host_file(dir, 1024);
    REQUIRE_FALSE(directory);
    CHECK(directory.error().message.find("not a regular file") != std::string::npos);
    // A fifo planted where a file was expected is refused without blocking on the open.
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    const auto fifo = sandbox::open_host_file(dir / "fifo", 1024);
    REQUIRE_FALSE(fifo);
    CHECK(fifo.error().kind == common::ErrorKind::invalid_input);
}
