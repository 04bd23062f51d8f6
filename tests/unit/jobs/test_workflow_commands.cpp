#include <catch2/catch.hpp>

#include "jobs/run/log.hpp"
#include "jobs/run/workflow_commands.hpp"

using namespace jobs;

TEST_CASE("parse_command follows the runner's ::name props::data syntax") {
    auto command = parse_command("  ::error file=app.js,line=10,col=15::Something%0Awent wrong");
    REQUIRE(command);
    CHECK(command->name == "error");
    REQUIRE(command->property("FILE"));
    CHECK(*command->property("file") == "app.js");
    CHECK(*command->property("line") == "10");
    CHECK(command->data == "Something\nwent wrong");

    CHECK_FALSE(parse_command("no command here"));
    CHECK_FALSE(parse_command("::warning no end"));
    CHECK_FALSE(parse_command(":::: empty name"));
    auto bare = parse_command("::endgroup::");
    REQUIRE(bare);
    CHECK(bare->name == "endgroup");
    CHECK(bare->data.empty());
    // Empty keys and values are dropped; a key with a leading space is kept as written.
    auto odd = parse_command("::warning =x,title=,file=a, line=3::m");
    REQUIRE(odd);
    CHECK(odd->properties.size() == 2);
    CHECK(odd->property("line") == nullptr);
    CHECK(*odd->property(" line") == "3");
}

TEST_CASE("unescaping is sequential and case-sensitive, as the runner does it") {
    CHECK(unescape_data("a%25b%0Dc%0Ad") == "a%b\rc\nd");
    CHECK(unescape_data("%250A") == "%0A");
    CHECK(unescape_data("%0a") == "%0a");
    CHECK(unescape_data("x%3Ay%2C") == "x%3Ay%2C");
    CHECK(unescape_property("x%3Ay%2Cz%25") == "x:y,z%");
}

namespace {
struct Fixture {
    Masker masker;
    MemoryLog log;
    StepLabel label{"job", "step"};
    CommandProcessor processor{masker, log, label, UnsecureCommands::disabled, Echo::off};
};
}  // namespace

TEST_CASE("annotations are collected with their properties, validated and masked") {
    Fixture f;
    f.masker.add_secret("topsecret");
    f.processor.process_line(
        "::error file=a.c,line=3,endLine=4,col=1,endColumn=2,title=T topsecret::bad topsecret");
    f.processor.process_line("::warning endLine=7::w");
    f.processor.process_line("::notice col=5::n");
    auto& annotations = f.processor.effects().annotations;
    REQUIRE(annotations.size() == 3);
    CHECK(annotations[0].level == AnnotationLevel::error);
    CHECK(annotations[0].message == "bad ***");
    CHECK(*annotations[0].title == "T ***");
    CHECK(*annotations[0].file == "a.c");
    CHECK(*annotations[0].line == 3);
    CHECK(*annotations[0].end_line == 4);
    CHECK_FALSE(annotations[0].column);  // columns need line == endLine
    CHECK(*annotations[1].line == 7);    // endLine alone becomes line
    CHECK_FALSE(annotations[2].column);  // a column without a line is dropped
    CHECK(f.log.joined().find("topsecret") == std::string::npos);
}

TEST_CASE("add-mask masks from the next line on, including what it was given") {
    Fixture f;
    f.processor.process_line("before s3kr1t-val");
    f.processor.process_line("::add-mask::s3kr1t-val");
    f.processor.process_line("after s3kr1t-val");
    f.processor.process_line("::add-mask::   ");
    const auto events = f.log.events();
    REQUIRE(events.size() == 3);
    CHECK(events[0] == "output:before s3kr1t-val");
    CHECK(events[1] == "output:after ***");
    CHECK(events[2].find("Can't add secret mask for empty string") != std::string::npos);
}

TEST_CASE("groups, debug and unknown commands") {
    Fixture f;
    f.processor.process_line("::group::Build %25 stuff");
    f.processor.process_line("inside");
    f.processor.process_line("::debug::dbg");
    f.processor.process_line("::frobnicate::x");
    f.processor.process_line("::group::second");
    f.processor.process_line("::endgroup::");
    f.processor.process_line("::endgroup::");  // nothing open: no event
    f.processor.process_line("::group::third");
    f.processor.finish();  // closes the open group
    CHECK(f.log.events() == std::vector<std::string>{"group:Build % stuff", "output:inside",
                                                     "debug:dbg", "output:::frobnicate::x",
                                                     "endgroup", "group:second", "endgroup",
                                                     "group:third", "endgroup"});
}

TEST_CASE("stop-commands pauses processing until its token comes back") {
    Fixture f;
    f.processor.process_line("::stop-commands::pause-token-1");
    f.processor.process_line("::set-output name=a::1");
    f.processor.process_line("::PAUSE-TOKEN-1::");
    f.processor.process_line("::save-state name=s::v");
    CHECK(f.processor.effects().outputs.empty());
    REQUIRE(f.processor.effects().state.size() == 1);
    CHECK(f.processor.effects().state[0].second == "v");
    const auto log = f.log.joined();
    CHECK(log.find("output:::set-output name=a::1") != std::string::npos);
    CHECK(log.find("deprecated") != std::string::npos);
    CHECK(f.processor.effects().failures.empty());
}

TEST_CASE("an invalid stop-commands token fails the step and does not stop") {
    Fixture f;
    f.processor.process_line("::stop-commands::warning");
    f.processor.process_line("::set-output name=a::1");
    CHECK(f.processor.effects().failures.size() == 1);
    CHECK(f.processor.effects().outputs.size() == 1);
}

TEST_CASE("set-output and save-state need a name") {
    Fixture f;
    f.processor.process_line("::set-output name=out1::value%0Atwo");
    f.processor.process_line("::set-output::nameless");
    REQUIRE(f.processor.effects().outputs.size() == 1);
    CHECK(f.processor.effects().outputs[0].second == "value\ntwo");
    REQUIRE(f.processor.effects().failures.size() == 1);
    CHECK(f.processor.effects().failures[0] ==
          "Required field 'name' is missing in ##[set-output] command.");
}

TEST_CASE("set-env and add-path fail the step unless unsecure commands are allowed") {
    Fixture f;
    f.processor.process_line("::set-env name=FOO::bar");
    f.processor.process_line("::add-path::/opt/bin");
    CHECK(f.processor.effects().env.empty());
    CHECK(f.processor.effects().path.empty());
    REQUIRE(f.processor.effects().failures.size() == 2);
    CHECK(f.processor.effects().failures[0].starts_with("The `set-env` command is disabled."));

    Masker masker;
    MemoryLog log;
    StepLabel label{"j", "s"};
    CommandProcessor allowed(masker, log, label, UnsecureCommands::enabled, Echo::off);
    allowed.process_line("::set-env name=FOO::bar");
    allowed.process_line("::set-env name=NODE_OPTIONS::--x");
    allowed.process_line("::add-path::/opt/bin");
    allowed.process_line("::add-path::/usr/local/x");
    allowed.process_line("::add-path::/opt/bin");
    CHECK(allowed.effects().failures.empty());
    REQUIRE(allowed.effects().env.size() == 1);
    CHECK(allowed.effects().env[0] == std::pair<std::string, std::string>{"FOO", "bar"});
    CHECK(allowed.effects().path == std::vector<std::string>{"/usr/local/x", "/opt/bin"});
    CHECK(allowed.effects().annotations.size() == 1);  // NODE_OPTIONS refused
}

TEST_CASE("echo on shows command lines, masked; echo with a bad value fails") {
    Fixture f;
    f.processor.process_line("::echo::on");
    f.processor.process_line("::add-mask::pa55word-x");
    f.processor.process_line("::set-output name=k::pa55word-x");
    f.processor.process_line("::echo::off");
    f.processor.process_line("::set-output name=k2::v");
    f.processor.process_line("::echo::maybe");
    const auto events = f.log.events();
    CHECK(events[0] == "output:::add-mask::***");
    CHECK(events[1] == "output:::set-output name=k::***");
    CHECK(f.log.joined().find("set-output name=k2") == std::string::npos);
    CHECK(f.processor.effects().failures.size() == 1);
}

TEST_CASE("parse_bool_true reads .NET booleans") {
    CHECK(parse_bool_true("true"));
    CHECK(parse_bool_true(" TRUE "));
    CHECK_FALSE(parse_bool_true("1"));
    CHECK_FALSE(parse_bool_true("yes"));
}

TEST_CASE("annotation files under the workspace become relative paths") {
    Fixture f;
    f.processor.set_workspace("/work/repo/");
    f.processor.process_line("::warning file=/work/repo/src/main.c,line=1::w");
    f.processor.process_line("::warning file=/work/repository/x.c::w");
    f.processor.process_line("::warning file=lib/y.c::w");
    const auto& annotations = f.processor.effects().annotations;
    REQUIRE(annotations.size() == 3);
    CHECK(*annotations[0].file == "src/main.c");
    CHECK(*annotations[1].file == "/work/repository/x.c");
    CHECK(*annotations[2].file == "lib/y.c");
}

TEST_CASE("the legacy ##[name k=v;]data form is still understood") {
    auto legacy = parse_legacy_command("prefix ##[warning file=a%3Bb.c;line=2]msg%5D");
    REQUIRE(legacy);
    CHECK(legacy->name == "warning");
    CHECK(*legacy->property("file") == "a;b.c");
    CHECK(legacy->data == "msg]");
    CHECK_FALSE(parse_legacy_command("##[ no name]"));
    CHECK_FALSE(parse_legacy_command("##[unterminated"));

    Fixture f;
    f.processor.process_line("log ##[error line=4]legacy error");
    f.processor.process_line("::unknown::then ##[notice]n");  // `::` form unknown: legacy tried
    f.processor.process_line("##[section]Starting");          // unregistered: plain output
    const auto& annotations = f.processor.effects().annotations;
    REQUIRE(annotations.size() == 2);
    CHECK(annotations[0].message == "legacy error");
    CHECK(*annotations[0].line == 4);
    CHECK(annotations[1].level == AnnotationLevel::notice);
    CHECK(f.log.events().back() == "output:##[section]Starting");
}
