// github/report_format: titles, summaries, texts and annotations within GitHub's limits.

#include <catch2/catch.hpp>

#include "github/report_format.hpp"

namespace {

github::JobReport base_report() {
    github::JobReport report;
    report.workflow = "CI";
    report.workflow_path = ".github/workflows/ci.yml";
    report.job = "build (linux)";
    report.job_key = "ci.yml#build";
    report.sha = "89abcdef0123456789abcdef0123456789abcdef";
    report.status = github::JobStatus::completed;
    report.conclusion = github::Conclusion::failure;
    report.exit_code = 2;
    return report;
}

bool valid_utf8(const std::string& text) {
    return github::sanitize_utf8(text) == text;
}

}  // namespace

TEST_CASE("the title says the essentials") {
    auto report = base_report();
    CHECK(github::check_title(report) == "exit 2");
    github::StepReport step;
    step.name = "test";
    step.stdout_truncated = true;
    step.stderr_truncated = true;
    step.skip_reasons = {"a", "b"};
    report.steps = {step, step};
    CHECK(github::check_title(report) ==
          "exit 2 · stdout truncated · stderr truncated · 4 skipped under wrap");
    report.conclusion = github::Conclusion::success;
    report.steps.clear();
    CHECK(github::check_title(report) == "passed");
    report.status = github::JobStatus::in_progress;
    CHECK(github::check_title(report) == "running");
    report.status = github::JobStatus::completed;
    report.conclusion = github::Conclusion::timed_out;
    CHECK(github::check_title(report) == "timed out");
    CHECK(github::status_description(report).size() <= 140);
}

TEST_CASE("the summary holds a table of steps, escaped, within 65535 characters") {
    auto report = base_report();
    github::StepReport step;
    step.name = "a | b <script>";
    step.conclusion = github::Conclusion::failure;
    step.exit_code = 2;
    step.duration = std::chrono::milliseconds(61'500);
    step.bytes_out = 2048;
    step.bytes_err = 5;
    step.stderr_truncated = true;
    step.skip_markers = 1;
    step.skip_reasons = {"nested pid namespace"};
    report.steps = {step};
    const std::string summary = github::check_summary(report);
    CHECK_THAT(summary, Catch::Contains("| 1 | a \\| b &lt;script> | failure | 2 | 1m 01s | "
                                        "2.0 KiB | 5 B | stderr | 1 |"));
    CHECK_THAT(summary, Catch::Contains("- a \\| b &lt;script>: nested pid namespace"));

    report.steps.assign(5000, step);
    const std::string big = github::check_summary(report);
    CHECK(big.size() <= github::k_max_output_chars);
    CHECK_THAT(big, Catch::Contains("more steps not shown"));
    CHECK(valid_utf8(big));
}

TEST_CASE("the text keeps the end of the output in a fence the output cannot close") {
    auto report = base_report();
    CHECK(github::check_text(report).empty());
    report.failing_step = "test";
    report.log_tail = "line ```` x\n";
    const std::string text = github::check_text(report);
    CHECK_THAT(text, Catch::Contains("`````\nline ```` x\n`````\n"));
    report.log_tail = std::string(100'000, 'a') + "\xC3" + std::string(30'000, '\xE2') + "TAIL";
    const std::string cut = github::check_text(report);
    CHECK(cut.size() <= github::k_max_output_chars);
    CHECK_THAT(cut, Catch::Contains("TAIL\n") && Catch::Contains("earlier output cut"));
    CHECK(valid_utf8(cut));
}

TEST_CASE("annotations are repaired to GitHub's constraints") {
    auto report = base_report();
    github::Annotation note;
    note.start_line = 0;
    note.end_line = 0;
    note.start_column = 5;
    note.title = std::string(300, '\xC3') + "x";  // invalid UTF-8 and too long
    note.message = std::string(70'000, 'm');
    github::Annotation multi;
    multi.path = "src/a.cpp";
    multi.start_line = 10;
    multi.end_line = 3;
    multi.start_column = 1;
    multi.end_column = 4;
    multi.level = github::AnnotationLevel::notice;
    report.annotations = {note, multi};
    auto clamped = github::clamp_annotations(report);
    REQUIRE(clamped.size() == 2);
    CHECK(clamped[0].path == ".github/workflows/ci.yml");
    CHECK(clamped[0].start_line == 1);
    CHECK(clamped[0].start_column == 5);
    CHECK(clamped[0].end_column == 0);
    CHECK(clamped[0].title.size() <= 255);
    CHECK(valid_utf8(clamped[0].title));
    CHECK(clamped[0].message.size() <= 64 * 1024);
    CHECK(clamped[1].start_line == 10);
    CHECK(clamped[1].end_line == 10);
    CHECK(clamped[1].start_column == 1);
    CHECK(clamped[1].end_column == 4);
    CHECK(clamped[1].message == "notice");
}

TEST_CASE("check names come from a template") {
    auto report = base_report();
    CHECK(github::render_check_name("{workflow} / {job}", report).value() == "CI / build (linux)");
    CHECK(github::render_check_name("{job_key}@{short_sha}", report).value() ==
          "ci.yml#build@89abcde");
    CHECK_FALSE(github::render_check_name("{workflow", report).has_value());
    CHECK_FALSE(github::render_check_name("{bogus}", report).has_value());
    CHECK_FALSE(github::render_check_name("", report).has_value());
}

TEST_CASE("UTF-8 helpers never split a character") {
    const std::string text = "a\xC3\xA9\xE2\x82\xAC";  // a é €
    CHECK(github::utf8_prefix(text, 2) == "a");
    CHECK(github::utf8_prefix(text, 3) == "a\xC3\xA9");
    CHECK(github::utf8_suffix(text, 4) == "\xE2\x82\xAC");
    CHECK(github::sanitize_utf8("x\xFFy") == "x\xEF\xBF\xBDy");
    CHECK(github::sanitize_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}
