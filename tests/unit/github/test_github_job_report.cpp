// github/job_report: validation and the lossless JSON round trip the journal relies on.

#include <catch2/catch.hpp>

#include "github/job_report.hpp"

TEST_CASE("a job report survives the JSON round trip") {
    github::JobReport report;
    report.workflow = "CI";
    report.workflow_path = ".github/workflows/ci.yml";
    report.job = "build";
    report.job_key = "ci.yml#build";
    report.sha = "abc";
    report.status = github::JobStatus::completed;
    report.conclusion = github::Conclusion::timed_out;
    report.exit_code = 124;
    report.failing_step = "compile";
    report.log_tail = "line\n";
    report.started_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1234567));
    github::StepReport step;
    step.name = "compile";
    step.conclusion = github::Conclusion::timed_out;
    step.duration = std::chrono::milliseconds(900);
    step.bytes_out = 1ULL << 40;
    step.stdout_truncated = true;
    step.skip_markers = 2;
    step.skip_reasons = {"x"};
    report.steps = {step};
    github::Annotation note;
    note.path = "a.c";
    note.start_line = 3;
    note.end_line = 3;
    note.end_column = 7;
    note.level = github::AnnotationLevel::warning;
    note.message = "m";
    report.annotations = {note};

    auto back = github::job_report_from_json(github::to_json(report));
    REQUIRE(back.has_value());
    CHECK(github::to_json(*back) == github::to_json(report));
    CHECK(back->steps.at(0).bytes_out == 1ULL << 40);
    CHECK_FALSE(back->steps.at(0).exit_code.has_value());
    CHECK(back->annotations.at(0).end_column == 7);
    CHECK_FALSE(back->annotations.at(0).start_column.has_value());
    CHECK(back->started_at == report.started_at);
    CHECK_FALSE(back->completed_at.has_value());
}

TEST_CASE("bad reports are refused naming the field") {
    github::JobReport report;
    auto invalid = github::validate(report);
    REQUIRE_FALSE(invalid.has_value());
    CHECK(invalid.error().message == "job report: `workflow` is empty");
    report.workflow = "w";
    report.job = "j";
    report.job_key = "k";
    report.sha = "s";
    report.status = github::JobStatus::completed;
    CHECK_THAT(github::validate(report).error().message, Catch::Contains("conclusion"));
    auto parsed = github::job_report_from_json(R"({"workflow": 3})");
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().message == "job report: field `workflow` missing or mistyped");
    CHECK(github::parse_annotation_level("error") == github::AnnotationLevel::failure);
    CHECK(github::format_github_time(std::chrono::system_clock::time_point(
              std::chrono::seconds(1468275250))) == "2016-07-11T22:14:10Z");
}
