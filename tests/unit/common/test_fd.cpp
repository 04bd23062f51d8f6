// sandbox/fd: the owning descriptor and close_all, which closes a run's handed-over fds in as
// few calls as their numbering allows.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <vector>

#include "common/fd.hpp"

namespace {

bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1;
}

common::Fd open_null() {
    return common::Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

}  // namespace

TEST_CASE("an Fd closes what it owns, hands it over on move and release") {
    int number = -1;
    {
        common::Fd fd = open_null();
        number = fd.get();
        REQUIRE(is_open(number));
        common::Fd moved = std::move(fd);
        CHECK_FALSE(fd.valid());
        CHECK(moved.get() == number);
    }
    CHECK_FALSE(is_open(number));
    common::Fd kept = open_null();
    const int raw = kept.release();
    CHECK(is_open(raw));
    ::close(raw);
}

TEST_CASE("close_all closes every fd it is given, adjacent or not, and nothing else") {
    // Adjacent numbers, a gap held by a bystander, one more run, an empty Fd.
    std::vector<common::Fd> fds;
    for (int i = 0; i < 5; ++i) fds.push_back(open_null());
    common::Fd bystander = open_null();
    for (int i = 0; i < 3; ++i) fds.push_back(open_null());
    fds.push_back(common::Fd());
    common::Fd single = open_null();
    common::Fd second_bystander = open_null();
    fds.insert(fds.begin() + 2, std::move(single));  // out of order
    std::vector<int> numbers;
    for (const auto& fd : fds)
        if (fd.valid()) numbers.push_back(fd.get());
    REQUIRE(numbers.size() == 9);

    common::close_all(fds);
    CHECK(fds.empty());
    for (const int number : numbers) CHECK_FALSE(is_open(number));
    CHECK(is_open(bystander.get()));
    CHECK(is_open(second_bystander.get()));

    std::vector<common::Fd> none;
    common::close_all(none);  // nothing to do
    CHECK(none.empty());
}
