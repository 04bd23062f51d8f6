#include <catch2/catch.hpp>

#include "common/xml_escape.hpp"

TEST_CASE("the five predefined entities, everything else as it is") {
    CHECK(common::xml_escape("") == "");
    CHECK(common::xml_escape("/home/a b/.m2") == "/home/a b/.m2");
    CHECK(common::xml_escape("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d&quot;e&apos;f");
    CHECK(common::xml_escape("&amp;") == "&amp;amp;");
    const std::string bytes("\0\xff\n", 3);
    CHECK(common::xml_escape(bytes) == bytes);
}
