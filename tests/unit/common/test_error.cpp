#include <fcntl.h>

#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace {

using common::ErrorKind;
using common::Expected;

Expected<int> number(int value) {
    if (value < 0)
        return common::fail(ErrorKind::invalid_input, "negative: " + std::to_string(value));
    return value;
}

Expected<void> positive(int value) {
    if (value <= 0) return common::fail(ErrorKind::timeout, "not positive");
    return {};
}

// Another value type than the TRY'd expression's: the error passes, the value does not.
Expected<std::string> twice_as_text(int value, int& evaluations) {
    const int checked = SANDGATE_TRY((++evaluations, number(value)));
    SANDGATE_CHECK(positive(checked));
    return std::to_string(checked * 2);
}

// A TRY in a lambda in a TRY: the inner one returns from the lambda only.
Expected<int> nested(int value) {
    const int inner =
        SANDGATE_TRY([&]() -> Expected<int> { return SANDGATE_TRY(number(value)) + 1; }());
    return inner * 10;
}

}  // namespace

TEST_CASE("fail() builds the error side with its kind and message") {
    common::Expected<int> value = common::fail(common::ErrorKind::timeout, "too slow");
    REQUIRE_FALSE(value.has_value());
    CHECK(value.error().kind == common::ErrorKind::timeout);
    CHECK(value.error().message == "too slow");
    CHECK(common::to_string(value.error().kind) == "timeout");
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

TEST_CASE("SANDGATE_TRY yields the value or returns the error, evaluating its expression once") {
    int evaluations = 0;
    CHECK(twice_as_text(21, evaluations) == "42");
    CHECK(evaluations == 1);
    const auto negative = twice_as_text(-3, evaluations);
    REQUIRE_FALSE(negative);
    CHECK(negative.error().kind == ErrorKind::invalid_input);
    CHECK(negative.error().message == "negative: -3");
    const auto zero = twice_as_text(0, evaluations);
    REQUIRE_FALSE(zero);
    CHECK(zero.error().kind == ErrorKind::timeout);  // the Expected<void> step's error
    CHECK(evaluations == 3);
    CHECK(nested(4) == 50);
    CHECK(nested(-1).error().message == "negative: -1");
}

TEST_CASE("SANDGATE_TRY copies an Expected held elsewhere instead of moving from it") {
    const auto take = [](const Expected<std::string>& held) -> Expected<std::size_t> {
        const std::string text = SANDGATE_TRY(held);
        return text.size();
    };
    Expected<std::string> held = std::string(100, 'x');
    CHECK(take(held) == 100U);
    CHECK(held.value().size() == 100U);
}
