#include "agent/cli/run_list.hpp"

#include <algorithm>
#include <map>

#include "agent/cli/run_setup.hpp"
#include "jobs/workflow/job_legs.hpp"
#include "jobs/workflow/workflow_call.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace agent {
namespace {

struct Row {
    std::string stage, id, workflow, file, runs_on, legs, runs;
};

std::string joined(const std::vector<std::string>& labels) {
    std::string out;
    for (const auto& label : labels) out += (out.empty() ? "" : ", ") + label;
    return out;
}

// A leg's verdict: "yes", "no: ..." or "? ..." (not known before the jobs it needs ran).
bool leg_runs(const Row& row) {
    return !row.runs.starts_with("no");
}

// The jobs of one workflow, listed as the runner would run them.
class JobLister {
public:
    JobLister(const jobs::RunSettings& settings, const jobs::Workflow& workflow,
              const jobs::Object& inputs)
        : m_settings(settings), m_workflow(workflow), m_inputs(inputs) {}

    // The job's row, then one per leg when it has a matrix; `runs` tells whether it may run.
    // `needs_status`: skipped when a job it needs, directly or not, does not run; success
    // otherwise.
    std::vector<Row> rows(const jobs::Job& job, int stage, jobs::RunStatus needs_status,
                          bool& runs) const {
        const bool ancestor_skipped = needs_status == jobs::RunStatus::skipped;
        Row row{
            std::to_string(stage), job.id, m_workflow.display_name(), m_workflow.file, "", "", ""};
        if (job.calls_workflow()) row.runs_on = "uses: " + job.uses->value;
        jobs::Object needs;
        for (const auto& id : job.needs)
            needs.set(id, jobs::job_result_entry(jobs::Outcome::success, {}));
        const jobs::JobScope scope{m_settings, m_workflow, job,
                                   needs,      m_inputs,   m_settings.secrets};
        const jobs::EvalContext context = jobs::job_eval_context(scope, needs_status);
        const std::string condition = job.condition ? job.condition->value : "success()";
        auto admitted =
            jobs::condition_at(condition, job.condition ? job.condition->mark : job.mark, context);
        runs = !admitted || *admitted;
        if (!runs) {
            row.runs =
                ancestor_skipped ? "no: a job it needs does not run" : "no: if: " + condition;
            return {row};
        }
        if (!admitted) row.runs = "if: " + condition + " (decided when the jobs it needs have run)";
        auto plan = jobs::plan_legs(job, context, m_settings);
        if (!plan) {
            row.legs = "?";
            if (row.runs.empty())
                row.runs = "yes; its matrix is known once the jobs it needs have run";
            return {row};
        }
        row.legs = std::to_string(plan->legs.size());
        std::vector<Row> legs = leg_rows(job, *plan, context, row.runs_on);
        const auto running = static_cast<std::size_t>(std::ranges::count_if(legs, leg_runs));
        runs = running > 0 || !admitted;
        if (legs.empty()) {
            if (row.runs.empty()) row.runs = "no: --matrix leaves no leg";
            return {row};
        }
        if (legs.size() == 1 && plan->legs.front().matrix.is_null()) {  // no matrix: one row
            row.runs_on = legs.front().runs_on;
            if (row.runs.empty()) row.runs = legs.front().runs;
            return {row};
        }
        const bool same = std::ranges::all_of(
            legs, [&](const Row& r) { return r.runs_on == legs.front().runs_on; });
        row.runs_on = same ? legs.front().runs_on : "(per leg)";
        if (row.runs.empty())
            row.runs = running == legs.size()
                           ? "yes"
                           : std::to_string(running) + " of " + row.legs + " legs";
        legs.insert(legs.begin(), std::move(row));
        return legs;
    }

private:
    std::vector<Row> leg_rows(const jobs::Job& job, const jobs::LegPlan& plan,
                              const jobs::EvalContext& context, const std::string& runs_on) const {
        std::vector<Row> rows;
        for (const auto& leg : plan.legs) {
            const jobs::EvalContext leg_context = jobs::leg_context(context, leg);
            Row row{"", "  " + jobs::leg_name(job, leg, leg_context), "", "", runs_on, "", "yes"};
            if (!job.calls_workflow()) {
                auto placement = jobs::place_leg(job, leg_context, m_settings);
                if (!placement) {
                    row.runs = "? " + placement.error().message;
                } else {
                    row.runs_on = joined(placement->runs_on);
                    if (placement->refusal) row.runs = "no: " + *placement->refusal;
                }
            }
            rows.push_back(std::move(row));
        }
        return rows;
    }

    const jobs::RunSettings& m_settings;
    const jobs::Workflow& m_workflow;
    const jobs::Object& m_inputs;
};

std::vector<Row> workflow_rows(const jobs::RunSettings& settings, const jobs::Workflow& workflow) {
    std::vector<Row> rows;
    auto inputs = top_level_inputs(settings, workflow);
    const jobs::Object given = inputs ? *inputs : jobs::Object{};
    const JobLister lister(settings, workflow, given);
    std::map<std::string, int> stage;
    std::map<std::string, bool> skipped;  // the job, or one it needs, does not run
    for (const auto& id : jobs::topological_order(workflow)) {
        const jobs::Job& job = *workflow.find_job(id);
        int s = 0;
        bool ancestor_skipped = false;
        for (const auto& need : job.needs) {
            s = std::max(s, stage[need] + 1);
            ancestor_skipped = ancestor_skipped || skipped[need];
        }
        stage[id] = s;
        bool runs = false;
        auto job_rows = lister.rows(
            job, s, ancestor_skipped ? jobs::RunStatus::skipped : jobs::RunStatus::success, runs);
        skipped[id] = !runs || ancestor_skipped;
        rows.insert(rows.end(), job_rows.begin(), job_rows.end());
    }
    return rows;
}

}  // namespace

void print_run_list(std::FILE* out, const jobs::RunSettings& settings,
                    const std::vector<jobs::Workflow>& workflows,
                    const std::vector<std::string>& skipped_files) {
    std::vector<Row> rows{{"Stage", "Job ID", "Workflow", "File", "Runs on", "Legs",
                           "Runs for " + settings.event_name}};
    for (const auto& workflow : workflows) {
        auto more = workflow_rows(settings, workflow);
        rows.insert(rows.end(), more.begin(), more.end());
    }
    std::size_t width[6] = {};
    for (const auto& row : rows) {
        const std::string* cells[] = {&row.stage, &row.id,      &row.workflow,
                                      &row.file,  &row.runs_on, &row.legs};
        for (std::size_t i = 0; i < 6; ++i) width[i] = std::max(width[i], cells[i]->size());
    }
    for (const auto& row : rows) {
        std::fprintf(out, "%-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %s\n", static_cast<int>(width[0]),
                     row.stage.c_str(), static_cast<int>(width[1]), row.id.c_str(),
                     static_cast<int>(width[2]), row.workflow.c_str(), static_cast<int>(width[3]),
                     row.file.c_str(), static_cast<int>(width[4]), row.runs_on.c_str(),
                     static_cast<int>(width[5]), row.legs.c_str(), row.runs.c_str());
    }
    for (const auto& file : skipped_files)
        std::fprintf(out, "not run for '%s' (its on: filters): %s\n", settings.event_name.c_str(),
                     file.c_str());
    std::fflush(out);
}

}  // namespace agent
