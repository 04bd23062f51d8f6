#include <catch2/catch.hpp>

#include "common/json_convert.hpp"
#include "sandbox/process/result_json.hpp"

TEST_CASE("valid_utf8 keeps well-formed text and replaces each ill-formed subpart") {
    using sandbox::valid_utf8;
    const std::string fffd = "\xEF\xBF\xBD";
    CHECK(valid_utf8("plain ascii\n") == "plain ascii\n");
    CHECK(valid_utf8("h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") ==
          "h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    CHECK(valid_utf8("a\xFF"
                     "b") == "a" + fffd + "b");
    CHECK(valid_utf8("\xC3") == fffd);  // truncated at the end
    CHECK(valid_utf8("\xE2\x82"
                     "x") == fffd + "x");                     // one replacement per subpart
    CHECK(valid_utf8("\xC0\xAF") == fffd + fffd);             // overlong
    CHECK(valid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);  // a surrogate
    CHECK(valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // past U+10FFFF
    CHECK(valid_utf8(std::string("\0x", 2)) == std::string("\0x", 2));
}

TEST_CASE("to_json: every field, in the documented order, errors included") {
    sandbox::RunResult result;
    result.exit_code = 2;
    result.duration = std::chrono::milliseconds(15);
    result.out.head = "ok\xFF";
    result.out.bytes = 3;
    result.err.head = "e";
    result.err.tail = "tail";
    result.err.bytes = 500000;
    result.err.truncated = true;
    result.skip_markers = 4;
    result.tree_kill = sandbox::TreeKill::cgroup;
    result.sandbox = {
        {"mode", "bwrap"}, {"limits", {{"pids", 10}}}, {"flags", {true, nullptr, 1.5}}};
    auto doc = sandbox::to_json(result);
    std::vector<std::string> keys;
    for (auto it = doc.begin(); it != doc.end(); ++it) keys.push_back(it.key());
    CHECK(keys == std::vector<std::string>{"exit_code", "signal", "timed_out", "duration_ms",
                                           "stdout", "stderr", "skip_markers", "tree_kill",
                                           "sandbox", "error"});
    CHECK(doc["exit_code"] == 2);
    CHECK(doc["signal"].is_null());
    CHECK(doc["duration_ms"] == 15);
    CHECK(doc["stdout"]["text"] == "ok\xEF\xBF\xBD");
    CHECK(doc["stderr"]["tail"] == "tail");
    CHECK(doc["stderr"]["bytes"] == 500000);
    CHECK(doc["stderr"]["truncated"] == true);
    CHECK(doc["tree_kill"] == "cgroup");
    CHECK(doc["sandbox"]["limits"]["pids"] == 10);
    CHECK(doc["sandbox"]["flags"][2] == 1.5);
    CHECK(doc["error"].is_null());

    result.exit_code.reset();
    result.signal = 15;
    result.error = sandbox::RunError{sandbox::RunErrorKind::timeout, "timed out after 1s", 0};
    doc = sandbox::to_json(result);
    CHECK(doc["exit_code"].is_null());
    CHECK(doc["signal"] == 15);
    CHECK(doc["error"]["kind"] == "timeout");
    CHECK(doc["error"]["message"] == "timed out after 1s");
}

TEST_CASE("to_ordered_json refuses what is not JSON") {
    CHECK_FALSE(common::to_ordered_json("{mode: off}"));
    CHECK(common::to_ordered_json("{\"a\":[1,2]}").value()["a"][1] == 2);
}
