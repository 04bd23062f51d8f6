// Workflow commands in a step's output (`::set-output name=x::v`, `::add-mask::`, groups,
// problem matchers, ...), one line at a time through the processor the runner uses.
#include "jobs/run/workflow_commands.hpp"

#include <string>

#include "fuzz/fuzz_target.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/workflow/workflow_matchers.hpp"

namespace {

class NullLog final : public jobs::LogSink {
public:
    void output(const jobs::StepLabel&, std::string_view) override {}
    void debug(const jobs::StepLabel&, std::string_view) override {}
    void group_start(const jobs::StepLabel&, std::string_view) override {}
    void group_end(const jobs::StepLabel&) override {}
    void annotation(const jobs::StepLabel&, const jobs::Annotation&) override {}
    void status(const jobs::StepLabel&, jobs::StatusKind, std::string_view) override {}
};

}  // namespace

SANDGATE_FUZZ_TARGET(workflow_commands) {
    const std::string_view input = fuzz::text(data, size);
    jobs::Masker masker;
    NullLog log;
    const jobs::StepLabel label{"job", "step"};
    std::vector<jobs::ProblemMatcher> matchers;
    jobs::CommandProcessor processor(masker, log, label, jobs::UnsecureCommands::enabled,
                                     jobs::Echo::on);
    processor.set_workspace("/work");
    processor.set_matchers(matchers);
    std::size_t start = 0;
    while (start <= input.size()) {
        const auto end = input.find('\n', start);
        const auto line = input.substr(
            start, end == std::string_view::npos ? std::string_view::npos : end - start);
        processor.process_line(line);
        (void)jobs::parse_command(line);
        (void)jobs::parse_legacy_command(line);
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    processor.finish();
    return 0;
}
