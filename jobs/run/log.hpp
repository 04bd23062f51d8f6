#pragma once
// Where a job's log goes. The step runner and the workflow runner call a LogSink; every text
// they pass is already masked. ConsoleLog prints act-like lines prefixed with `[job/step]`;
// MemoryLog records events (tests, reports).
//
// Sinks are shared by jobs running in parallel: implementations serialise their writes.

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/run/workflow_commands.hpp"

namespace jobs {

struct StepLabel {
    std::string job;   // job id (with matrix values when any)
    std::string step;  // step display name
};

enum class StatusKind { start, success, failure, skipped, cancelled, info };

class LogSink {
public:
    virtual ~LogSink() = default;
    virtual void output(const StepLabel& label, std::string_view line) = 0;
    virtual void debug(const StepLabel& label, std::string_view line) = 0;
    virtual void group_start(const StepLabel& label, std::string_view title) = 0;
    virtual void group_end(const StepLabel& label) = 0;
    virtual void annotation(const StepLabel& label, const Annotation& annotation) = 0;
    // The runner's own lines: a step starting, finishing, a job skipped, ...
    virtual void status(const StepLabel& label, StatusKind kind, std::string_view text) = 0;
};

// `[job/step]   | line`, `[job/step] ⭐ Run ...`, `[job/step]   ✅  Success - ...`,
// groups as `▼ title` / `▲` with output indented, annotations as `::error file=...::msg`-like
// one-liners. Debug lines only with DebugLog::shown.
class ConsoleLog final : public LogSink {
public:
    explicit ConsoleLog(std::FILE* out, DebugLog debug = DebugLog::hidden);
    void output(const StepLabel& label, std::string_view line) override;
    void debug(const StepLabel& label, std::string_view line) override;
    void group_start(const StepLabel& label, std::string_view title) override;
    void group_end(const StepLabel& label) override;
    void annotation(const StepLabel& label, const Annotation& annotation) override;
    void status(const StepLabel& label, StatusKind kind, std::string_view text) override;

private:
    void write(const StepLabel& label, std::string_view marker, std::string_view text);

    std::FILE* m_out;
    DebugLog m_debug;
    std::mutex m_mutex;
};

// Records every event as one string: "output:TEXT", "debug:TEXT", "group:TITLE", "endgroup",
// "annotation:LEVEL:MESSAGE", "status:KIND:TEXT" (label not included).
class MemoryLog final : public LogSink {
public:
    void output(const StepLabel& label, std::string_view line) override;
    void debug(const StepLabel& label, std::string_view line) override;
    void group_start(const StepLabel& label, std::string_view title) override;
    void group_end(const StepLabel& label) override;
    void annotation(const StepLabel& label, const Annotation& annotation) override;
    void status(const StepLabel& label, StatusKind kind, std::string_view text) override;

    std::vector<std::string> events() const;
    std::string joined() const;  // events joined with '\n'

private:
    void add(std::string event);

    mutable std::mutex m_mutex;
    std::vector<std::string> m_events;
};

std::string_view to_string(StatusKind kind);

// The one-line rendering of an annotation: `error file=a.c,line=3,col=1,title=T::message`.
std::string format_annotation(const Annotation& annotation);

}  // namespace jobs
