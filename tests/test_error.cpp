#include <fcntl.h>

#include <catch2/catch.hpp>

#include "sandbox/error.hpp"
#include "sandbox/fd.hpp"

TEST_CASE("fail() builds the error side with its kind and message") {
    sandbox::Expected<int> value = sandbox::fail(sandbox::ErrorKind::timeout, "too slow");
    REQUIRE_FALSE(value.has_value());
    CHECK(value.error().kind == sandbox::ErrorKind::timeout);
    CHECK(value.error().message == "too slow");
    CHECK(sandbox::to_string(value.error().kind) == "timeout");
}

TEST_CASE("Fd closes what it owns and moves ownership") {
    int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(raw >= 0);
    {
        sandbox::Fd first(raw);
        sandbox::Fd second(std::move(first));
        CHECK_FALSE(first.valid());
        CHECK(second.get() == raw);
        CHECK(::fcntl(raw, F_GETFD) != -1);
    }
    CHECK(::fcntl(raw, F_GETFD) == -1);  // closed by the destructor
}
