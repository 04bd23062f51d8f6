#pragma once
// What a JobReport looks like on GitHub: the check run's title, Markdown summary and text, the
// annotations clamped to GitHub's limits, and the commit status description. Pure functions.
//
// Limits (GitHub's): summary and text at most 65535 characters each; annotation title at most
// 255 characters, message at most 64 KB; at most 50 annotations per request; a commit status
// description at most 140 characters. Lengths here are counted in bytes, which bounds the
// character count too. All output is valid UTF-8 (invalid input bytes become U+FFFD).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "github/job_report.hpp"

namespace github {

inline constexpr std::size_t k_max_output_chars = 65535;  // summary, text
inline constexpr std::size_t k_max_title_chars = 255;     // annotation title (and run title)
inline constexpr std::size_t k_max_annotation_message = 64 * 1024 - 1;
inline constexpr std::size_t k_annotations_per_request = 50;
inline constexpr std::size_t k_max_status_description = 140;

// Replaces invalid UTF-8 sequences with U+FFFD.
std::string sanitize_utf8(std::string_view text);
// At most `max_bytes` of valid UTF-8 from the front (never splitting a character).
std::string utf8_prefix(std::string_view text, std::size_t max_bytes);
// At most `max_bytes` of valid UTF-8 from the back.
std::string utf8_suffix(std::string_view text, std::size_t max_bytes);

// "{workflow} / {job}" by default; placeholders {workflow}, {job}, {job_key}, {sha}, and
// {short_sha} (7 characters). Unknown placeholders are invalid_input naming them.
common::Expected<std::string> render_check_name(std::string_view name_template,
                                                const JobReport& report);

// e.g. "exit 1 · stdout truncated · 3 skipped under wrap", or "running" for a started job.
std::string check_title(const JobReport& report);
// A heading, the table of steps and the skip markers, within k_max_output_chars.
std::string check_summary(const JobReport& report);
// The masked tail of the failing step's output in a code fence, within k_max_output_chars;
// empty when there is none.
std::string check_text(const JobReport& report);

// The report's annotations with GitHub's constraints applied: a path (the workflow file when
// none), lines >= 1 and ordered, columns only on a single line, title and message clamped.
struct ClampedAnnotation {
    std::string path;
    int start_line = 1;
    int end_line = 1;
    int start_column = 0;  // 0: omitted
    int end_column = 0;
    std::string title;  // empty: omitted
    AnnotationLevel level = AnnotationLevel::failure;
    std::string message;
};
std::vector<ClampedAnnotation> clamp_annotations(const JobReport& report);

// One line for a commit status, at most k_max_status_description bytes.
std::string status_description(const JobReport& report);

}  // namespace github
