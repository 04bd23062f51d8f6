#include "jobs/run/log.hpp"

#include <string>

namespace jobs {

std::string_view to_string(StatusKind kind) {
    switch (kind) {
        case StatusKind::start:
            return "start";
        case StatusKind::success:
            return "success";
        case StatusKind::failure:
            return "failure";
        case StatusKind::skipped:
            return "skipped";
        case StatusKind::cancelled:
            return "cancelled";
        case StatusKind::info:
            return "info";
    }
    return "info";
}

std::string format_annotation(const Annotation& annotation) {
    std::string out(to_string(annotation.level));
    std::string props;
    auto add = [&props](std::string_view key, const std::string& value) {
        props += props.empty() ? " " : ",";
        props += key;
        props += '=';
        props += value;
    };
    if (annotation.file) add("file", *annotation.file);
    if (annotation.line) add("line", std::to_string(*annotation.line));
    if (annotation.end_line) add("endLine", std::to_string(*annotation.end_line));
    if (annotation.column) add("col", std::to_string(*annotation.column));
    if (annotation.end_column) add("endColumn", std::to_string(*annotation.end_column));
    if (annotation.title) add("title", *annotation.title);
    return out + props + "::" + annotation.message;
}

ConsoleLog::ConsoleLog(std::FILE* out, DebugLog debug) : m_out(out), m_debug(debug) {}

void ConsoleLog::write(const StepLabel& label, std::string_view marker, std::string_view text) {
    std::lock_guard lock(m_mutex);
    std::string line = "[" + label.job;
    if (!label.step.empty()) line += "/" + label.step;
    line += "] ";
    line += marker;
    line += text;
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), m_out);
    std::fflush(m_out);
}

void ConsoleLog::output(const StepLabel& label, std::string_view line) {
    write(label, "  | ", line);
}

void ConsoleLog::debug(const StepLabel& label, std::string_view line) {
    if (m_debug == DebugLog::shown) write(label, "  🐛 ", line);
}

void ConsoleLog::group_start(const StepLabel& label, std::string_view title) {
    write(label, "  ▼ ", title);
}

void ConsoleLog::group_end(const StepLabel& label) {
    write(label, "  ▲", "");
}

void ConsoleLog::annotation(const StepLabel& label, const Annotation& annotation) {
    const std::string_view marker = annotation.level == AnnotationLevel::error     ? "  ❗ "
                                    : annotation.level == AnnotationLevel::warning ? "  ⚠ "
                                                                                   : "  ℹ ";
    write(label, marker, format_annotation(annotation));
}

void ConsoleLog::status(const StepLabel& label, StatusKind kind, std::string_view text) {
    switch (kind) {
        case StatusKind::start:
            write(label, "⭐ ", text);
            break;
        case StatusKind::success:
            write(label, "  ✅  ", text);
            break;
        case StatusKind::failure:
            write(label, "  ❌  ", text);
            break;
        case StatusKind::skipped:
            write(label, "  ⏭  ", text);
            break;
        case StatusKind::cancelled:
            write(label, "  🚫  ", text);
            break;
        case StatusKind::info:
            write(label, "  ", text);
            break;
    }
}

void MemoryLog::add(std::string event) {
    std::lock_guard lock(m_mutex);
    m_events.push_back(std::move(event));
}

void MemoryLog::output(const StepLabel&, std::string_view line) {
    add("output:" + std::string(line));
}
void MemoryLog::debug(const StepLabel&, std::string_view line) {
    add("debug:" + std::string(line));
}
void MemoryLog::group_start(const StepLabel&, std::string_view title) {
    add("group:" + std::string(title));
}
void MemoryLog::group_end(const StepLabel&) {
    add("endgroup");
}
void MemoryLog::annotation(const StepLabel&, const Annotation& annotation) {
    add("annotation:" + format_annotation(annotation));
}
void MemoryLog::status(const StepLabel&, StatusKind kind, std::string_view text) {
    add("status:" + std::string(to_string(kind)) + ":" + std::string(text));
}

std::vector<std::string> MemoryLog::events() const {
    std::lock_guard lock(m_mutex);
    return m_events;
}

std::string MemoryLog::joined() const {
    std::lock_guard lock(m_mutex);
    std::string out;
    for (const auto& event : m_events) {
        if (!out.empty()) out += '\n';
        out += event;
    }
    return out;
}

}  // namespace jobs
