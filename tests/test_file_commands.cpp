#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "jobs/file_commands.hpp"
#include "tests/support/temp_dir.hpp"

using namespace jobs;

namespace {
NamedValues parse_ok(std::string_view text) {
    auto parsed = parse_key_value_text(text, "GITHUB_OUTPUT");
    INFO(text);
    REQUIRE(parsed.has_value());
    return *parsed;
}
std::string parse_error(std::string_view text) {
    auto parsed = parse_key_value_text(text, "GITHUB_ENV");
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().kind == sandbox::ErrorKind::invalid_input);
    return parsed.error().message;
}
}  // namespace

TEST_CASE("NAME=value lines split at the first '=' and skip empty lines") {
    const auto values = parse_ok("A=1\n\nB=x=y\nC=\n A =spaced\nA=2");
    REQUIRE(values.size() == 4);
    CHECK(values[0] == std::pair<std::string, std::string>{"A", "2"});  // later wins, first place
    CHECK(values[1].second == "x=y");
    CHECK(values[2].second.empty());
    CHECK(values[3].first == " A ");
}

TEST_CASE("heredocs take every line up to the exact delimiter") {
    const auto values = parse_ok("M<<EOF\nline 1\n\nline 3\nEOF\nN<<EOF\nEOF\nK=v<<x\nH<<a=b\nv\na=b\n");
    REQUIRE(values.size() == 4);
    CHECK(values[0].second == "line 1\n\nline 3");
    CHECK(values[1].second.empty());
    CHECK(values[2] == std::pair<std::string, std::string>{"K", "v<<x"});  // '=' came first
    CHECK(values[3] == std::pair<std::string, std::string>{"H", "v"});     // '<<' came first
    // A delimiter line with trailing space is not the delimiter.
    const auto spaced = parse_ok("M<<EOF\nEOF \nEOF\n");
    CHECK(spaced[0].second == "EOF ");
    // The delimiter may be the last line without a newline.
    CHECK(parse_ok("M<<END\nx\nEND")[0].second == "x");
}

TEST_CASE("CRLF line endings are line endings") {
    const auto values = parse_ok("A=1\r\nM<<EOF\r\none\r\ntwo\r\nEOF\r\n");
    REQUIRE(values.size() == 2);
    CHECK(values[0].second == "1");
    CHECK(values[1].second == "one\r\ntwo");
}

TEST_CASE("malformed files give errors naming the file and line") {
    CHECK(parse_error("A=1\njunk line\n") == "GITHUB_ENV:2: Invalid format 'junk line'");
    CHECK(parse_error("=value\n") == "GITHUB_ENV:1: Invalid format '=value'. Name must not be empty");
    CHECK(parse_error("A=1\n<<EOF\nx\nEOF\n").starts_with("GITHUB_ENV:2: Invalid format '<<EOF'"));
    CHECK(parse_error("NAME<<\n").starts_with("GITHUB_ENV:1: Invalid format"));
    CHECK(parse_error("A=1\nM<<EOF\nnever closed\n") ==
          "GITHUB_ENV:2: Invalid value. Matching delimiter not found 'EOF'");
    CHECK(parse_error("M<<EOF\nvalue") == "GITHUB_ENV:2: Invalid value. EOF marker missing new line.");
}

TEST_CASE("path files list one directory per non-empty line") {
    CHECK(parse_path_text("/a\n\n/b\r\n/c") == std::vector<std::string>{"/a", "/b", "/c"});
}

TEST_CASE("PathPrepends puts the newest entry first and moves re-added ones") {
    PathPrepends path;
    path.add("/one");
    path.add("/two");
    path.add("/one");
    CHECK(path.apply("/usr/bin:/bin") == "/one:/two:/usr/bin:/bin");
    CHECK(PathPrepends().apply("/usr/bin") == "/usr/bin");
}

TEST_CASE("the five files are created empty, read back and removed") {
    const auto dir = tests::make_temp_dir("filecmd") / "nested";
    auto paths = create_file_commands(dir);
    REQUIRE(paths.has_value());
    for (const auto& file : {paths->env, paths->output, paths->path, paths->state, paths->summary}) {
        CHECK(std::filesystem::is_regular_file(file));
        CHECK(std::filesystem::file_size(file) == 0);
    }
    const auto env = file_command_environment(*paths);
    REQUIRE(env.size() == 5);
    CHECK(env[0].first == "GITHUB_ENV");
    CHECK(env[4].second == paths->summary.string());

    tests::write_file(paths->env, "FOO=bar\nNODE_OPTIONS=--inspect\n");
    tests::write_file(paths->output, "o<<X\nmulti\nline\nX\n");
    tests::write_file(paths->path, "/opt/tool/bin\n");
    tests::write_file(paths->state, "s=1\n");
    tests::write_file(paths->summary, "# Title\n");
    const auto results = read_file_commands(*paths);
    CHECK(results.failures.empty());
    CHECK(results.env == NamedValues{{"FOO", "bar"}});
    CHECK(results.outputs == NamedValues{{"o", "multi\nline"}});
    CHECK(results.state == NamedValues{{"s", "1"}});
    CHECK(results.path == std::vector<std::string>{"/opt/tool/bin"});
    CHECK(results.summary == "# Title\n");
    REQUIRE(results.annotations.size() == 1);
    CHECK(results.annotations[0].message.find("NODE_OPTIONS") != std::string::npos);

    remove_file_commands(*paths);
    CHECK_FALSE(std::filesystem::exists(paths->env));
    CHECK_FALSE(std::filesystem::exists(paths->summary));
}

TEST_CASE("a bad file contributes nothing and fails; an oversized summary is dropped") {
    const auto dir = tests::make_temp_dir("filecmd");
    auto paths = create_file_commands(dir);
    REQUIRE(paths.has_value());
    tests::write_file(paths->output, "good=1\nbad line\n");
    tests::write_file(paths->summary, std::string(k_max_summary_bytes + 1, 'x'));
    const auto results = read_file_commands(*paths);
    CHECK(results.outputs.empty());
    REQUIRE(results.failures.size() == 1);
    CHECK(results.failures[0] == "GITHUB_OUTPUT:2: Invalid format 'bad line'");
    CHECK(results.summary.empty());
    bool summary_error = false;
    for (const auto& annotation : results.annotations) {
        if (annotation.message.starts_with("$GITHUB_STEP_SUMMARY upload aborted, supports content "
                                           "up to a size of 1024k, got 1024k")) {
            summary_error = true;
        }
    }
    CHECK(summary_error);
    // Exactly at the limit is accepted.
    auto again = create_file_commands(dir);
    REQUIRE(again.has_value());
    tests::write_file(again->summary, std::string(k_max_summary_bytes, 'y'));
    CHECK(read_file_commands(*again).summary.size() == k_max_summary_bytes);
}

TEST_CASE("missing files count as empty") {
    const auto dir = tests::make_temp_dir("filecmd");
    FileCommandPaths paths{dir / "a", dir / "b", dir / "c", dir / "d", dir / "e"};
    const auto results = read_file_commands(paths);
    CHECK(results.failures.empty());
    CHECK(results.env.empty());
    CHECK(results.summary.empty());
}
