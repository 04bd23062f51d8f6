// Workflow YAML: GitHub's reader, schema and converters (jobs/workflow/workflow_model.hpp). A
// refusal is one line naming the file; an accepted workflow has a job order and, for a matrix
// written out, at most 256 legs.
#include "fuzz/fuzz_target.hpp"
#include "jobs/workflow/matrix.hpp"
#include "jobs/workflow/workflow_model.hpp"
#include "jobs/workflow/yaml_value.hpp"

SANDGATE_FUZZ_TARGET(workflow) {
    auto workflow = jobs::parse_workflow(fuzz::text(data, size), "w.yml");
    if (!workflow) {
        fuzz::check_one_line(workflow.error().message);
        fuzz::check(workflow.error().message.starts_with("w.yml"), "a refusal names the file");
        return 0;
    }
    fuzz::check(jobs::topological_order(*workflow).size() == workflow->jobs.size(),
                "every job is ordered");
    for (const auto& job : workflow->jobs) {
        if (!job.strategy || !job.strategy->matrix.is_mapping()) continue;
        const jobs::Value matrix = jobs::yaml_to_value(job.strategy->matrix);
        if (auto legs = jobs::expand_matrix(matrix))
            fuzz::check(legs->size() <= 256, "at most 256 legs");
    }
    return 0;
}
