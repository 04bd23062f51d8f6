#include "github/report_format.hpp"

#include <algorithm>
#include <cstdio>

namespace github {
namespace {

constexpr std::string_view k_dot = " \xC2\xB7 ";            // " · "
constexpr std::string_view k_replacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at text[at], or 0 when it is invalid there.
size_t sequence_length(std::string_view text, size_t at) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    if (lead < 0x80) return 1;
    size_t length = 0;
    unsigned min = 0;
    if ((lead & 0xE0) == 0xC0)
        length = 2, min = 0x80;
    else if ((lead & 0xF0) == 0xE0)
        length = 3, min = 0x800;
    else if ((lead & 0xF8) == 0xF0)
        length = 4, min = 0x10000;
    else
        return 0;
    if (at + length > text.size()) return 0;
    unsigned code = lead & (0xFF >> (length + 1));
    for (size_t i = 1; i < length; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80) return 0;
        code = (code << 6) | (byte(at + i) & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return length;
}

std::string cell(std::string_view text) {
    std::string out;
    for (char c : sanitize_utf8(text)) {
        if (c == '|')
            out += "\\|";
        else if (c == '<')
            out += "&lt;";
        else if (c == '\n' || c == '\r')
            out += ' ';
        else
            out += c;
    }
    return out;
}

std::string human_bytes(std::uint64_t bytes) {
    char buffer[32];
    if (bytes < 1024) {
        std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
    } else if (bytes < 1024 * 1024) {
        std::snprintf(buffer, sizeof buffer, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
    } else {
        std::snprintf(buffer, sizeof buffer, "%.1f MiB",
                      static_cast<double>(bytes) / (1024.0 * 1024.0));
    }
    return buffer;
}

std::string human_duration(std::chrono::milliseconds duration) {
    char buffer[32];
    const double seconds = static_cast<double>(duration.count()) / 1000.0;
    if (seconds < 60) {
        std::snprintf(buffer, sizeof buffer, "%.1f s", seconds);
    } else {
        std::snprintf(buffer, sizeof buffer, "%lldm %02llds", static_cast<long long>(seconds) / 60,
                      static_cast<long long>(seconds) % 60);
    }
    return buffer;
}

std::string truncation_of(const StepReport& step) {
    if (step.stdout_truncated && step.stderr_truncated) return "stdout, stderr";
    if (step.stdout_truncated) return "stdout";
    if (step.stderr_truncated) return "stderr";
    return "";
}

std::uint64_t skips_of(const StepReport& step) {
    return std::max<std::uint64_t>(step.skip_markers, step.skip_reasons.size());
}

size_t skip_marker_count(const JobReport& report) {
    size_t count = 0;
    for (const auto& step : report.steps) count += skips_of(step);
    return count;
}

std::string headline(const JobReport& report) {
    if (report.status != JobStatus::completed || !report.conclusion) return "running";
    switch (*report.conclusion) {
        case Conclusion::success:
            return "passed";
        case Conclusion::failure:
            return report.exit_code ? "exit " + std::to_string(*report.exit_code) : "failed";
        case Conclusion::timed_out:
            return "timed out";
        case Conclusion::cancelled:
            return "cancelled";
        case Conclusion::skipped:
            return "skipped";
    }
    return "failed";
}

}  // namespace

std::string sanitize_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        const size_t length = sequence_length(text, at);
        if (length == 0) {
            out += k_replacement;
            ++at;
        } else {
            out.append(text.substr(at, length));
            at += length;
        }
    }
    return out;
}

std::string utf8_prefix(std::string_view text, size_t max_bytes) {
    std::string clean = sanitize_utf8(text);
    if (clean.size() <= max_bytes) return clean;
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xC0) == 0x80) --cut;
    clean.resize(cut);
    return clean;
}

std::string utf8_suffix(std::string_view text, size_t max_bytes) {
    std::string clean = sanitize_utf8(text);
    if (clean.size() <= max_bytes) return clean;
    size_t from = clean.size() - max_bytes;
    while (from < clean.size() && (static_cast<unsigned char>(clean[from]) & 0xC0) == 0x80) {
        ++from;
    }
    return clean.substr(from);
}

common::Expected<std::string> render_check_name(std::string_view name_template,
                                                const JobReport& report) {
    std::string out;
    for (size_t at = 0; at < name_template.size();) {
        const size_t open = name_template.find('{', at);
        if (open == std::string_view::npos) {
            out.append(name_template.substr(at));
            break;
        }
        out.append(name_template.substr(at, open - at));
        const size_t close = name_template.find('}', open);
        if (close == std::string_view::npos) {
            return common::fail(
                common::ErrorKind::invalid_input,
                "--check-name: unclosed '{' in '" + std::string(name_template) + "'");
        }
        const std::string_view key = name_template.substr(open + 1, close - open - 1);
        if (key == "workflow")
            out += report.workflow;
        else if (key == "job")
            out += report.job;
        else if (key == "job_key")
            out += report.job_key;
        else if (key == "sha")
            out += report.sha;
        else if (key == "short_sha")
            out += report.sha.substr(0, 7);
        else {
            return common::fail(common::ErrorKind::invalid_input,
                                "--check-name: unknown placeholder {" + std::string(key) +
                                    "} (known: {workflow} {job} {job_key} {sha} {short_sha})");
        }
        at = close + 1;
    }
    if (out.empty()) {
        return common::fail(common::ErrorKind::invalid_input, "--check-name renders empty");
    }
    return utf8_prefix(out, k_max_title_chars);
}

std::string check_title(const JobReport& report) {
    std::string title = headline(report);
    bool out = false;
    bool err = false;
    for (const auto& step : report.steps) {
        out = out || step.stdout_truncated;
        err = err || step.stderr_truncated;
    }
    if (out) title += std::string(k_dot) + "stdout truncated";
    if (err) title += std::string(k_dot) + "stderr truncated";
    if (const size_t skipped = skip_marker_count(report); skipped > 0) {
        title += std::string(k_dot) + std::to_string(skipped) + " skipped under wrap";
    }
    return utf8_prefix(title, k_max_title_chars);
}

std::string check_summary(const JobReport& report) {
    std::string head =
        "### " + cell(report.workflow) + " / " + cell(report.job) + ": " +
        std::string(report.conclusion ? to_string(*report.conclusion) : to_string(report.status)) +
        "\n\n" + check_title(report) + "\n";
    if (!report.failing_step.empty())
        head += "\nFailing step: `" + cell(report.failing_step) + "`\n";
    std::vector<std::string> rows;
    for (size_t i = 0; i < report.steps.size(); ++i) {
        const auto& step = report.steps[i];
        rows.push_back("| " + std::to_string(i + 1) + " | " + cell(step.name) + " | " +
                       std::string(to_string(step.conclusion)) + " | " +
                       (step.exit_code ? std::to_string(*step.exit_code) : "") + " | " +
                       human_duration(step.duration) + " | " + human_bytes(step.bytes_out) + " | " +
                       human_bytes(step.bytes_err) + " | " + truncation_of(step) + " | " +
                       std::to_string(skips_of(step)) + " |\n");
    }
    std::string markers;
    for (const auto& step : report.steps) {
        for (const auto& reason : step.skip_reasons) {
            markers += "- " + cell(step.name) + ": " + cell(reason) + "\n";
        }
    }
    if (!markers.empty()) markers = "\n#### Skipped under wrap\n\n" + markers;
    constexpr size_t k_reserve = 200;  // room for the "more steps" note
    std::string summary = head;
    if (!rows.empty()) {
        summary +=
            "\n| # | Step | Conclusion | Exit | Duration | Out | Err | Truncated | "
            "Skipped under wrap |\n|--:|---|---|--:|--:|--:|--:|---|--:|\n";
    }
    size_t shown = 0;
    for (; shown < rows.size(); ++shown) {
        if (summary.size() + rows[shown].size() + k_reserve > k_max_output_chars) break;
        summary += rows[shown];
    }
    if (shown < rows.size()) {
        summary += "\n_" + std::to_string(rows.size() - shown) + " more steps not shown._\n";
    }
    if (summary.size() + markers.size() <= k_max_output_chars) summary += markers;
    return utf8_prefix(summary, k_max_output_chars);
}

std::string check_text(const JobReport& report) {
    if (report.log_tail.empty()) return "";
    std::string heading = "Last output of `" +
                          cell(report.failing_step.empty() ? report.job : report.failing_step) +
                          "` (masked):\n\n";
    // A fence longer than any backtick run in the output, so the output cannot close it.
    size_t longest = 0;
    size_t run = 0;
    for (char c : report.log_tail) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    const std::string fence(std::max<size_t>(3, longest + 1), '`');
    const size_t overhead = heading.size() + 2 * fence.size() + 2 + 40;
    std::string tail = sanitize_utf8(report.log_tail);
    std::string note;
    if (tail.size() + overhead > k_max_output_chars) {
        tail = utf8_suffix(tail, k_max_output_chars - overhead);
        note = "(earlier output cut)\n";
    }
    if (!tail.ends_with('\n')) tail += '\n';
    return utf8_prefix(heading + fence + "\n" + note + tail + fence + "\n", k_max_output_chars);
}

std::vector<ClampedAnnotation> clamp_annotations(const JobReport& report) {
    std::vector<ClampedAnnotation> out;
    out.reserve(report.annotations.size());
    for (const auto& note : report.annotations) {
        ClampedAnnotation clamped;
        clamped.path = sanitize_utf8(
            note.path.empty() ? (report.workflow_path.empty() ? ".github" : report.workflow_path)
                              : note.path);
        clamped.start_line = std::max(note.start_line, 1);
        clamped.end_line = std::max(note.end_line, clamped.start_line);
        if (clamped.start_line == clamped.end_line && note.start_column) {
            clamped.start_column = std::max(*note.start_column, 1);
            clamped.end_column =
                note.end_column ? std::max(*note.end_column, clamped.start_column) : 0;
        }
        clamped.title = utf8_prefix(note.title, k_max_title_chars);
        clamped.level = note.level;
        clamped.message =
            utf8_prefix(note.message.empty() ? std::string(to_string(note.level)) : note.message,
                        k_max_annotation_message);
        out.push_back(std::move(clamped));
    }
    return out;
}

std::string status_description(const JobReport& report) {
    return utf8_prefix(check_title(report), k_max_status_description);
}

}  // namespace github
