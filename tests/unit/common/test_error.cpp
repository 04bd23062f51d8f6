#include <fcntl.h>

#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/fd.hpp"

TEST_CASE("fail() builds the error side with its kind and message") {
    common::Expected<int> value = common::fail(common::ErrorKind::timeout, "too slow");
    REQUIRE_FALSE(value.has_value());
    CHECK(value.error().kind == common::ErrorKind::timeout);
    CHECK(value.error().message == "too slow");
    CHECK(sandbox::to_string(value.error().kind) == "timeout");
}

TEST_CASE("Fd closes what it owns and moves ownership") {
    int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(raw >= 0);
    {
        common::Fd first(raw);
        common::Fd second(std::move(first));
        CHECK_FALSE(first.valid());
        CHECK(second.get() == raw);
        CHECK(::fcntl(raw, F_GETFD) != -1);
    }
    CHECK(::fcntl(raw, F_GETFD) == -1);  // closed by the destructor
}
