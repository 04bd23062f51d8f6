#include "jobs/run/workflow_runner.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "jobs/run/job_runner.hpp"
#include "jobs/workflow/job_legs.hpp"
#include "jobs/workflow/workflow_call.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs {
namespace {

struct JobOutcome {
    Outcome result = Outcome::skipped;
    NamedValues outputs;
};

bool uses_status_function(std::string_view condition) {
    const std::string folded = fold_case(condition);
    for (std::string_view name : {"SUCCESS(", "FAILURE(", "ALWAYS(", "CANCELLED("}) {
        if (folded.find(name) != std::string::npos) return true;
    }
    return false;
}

Annotation notice(std::string message) {
    return Annotation{.level = AnnotationLevel::notice, .message = std::move(message)};
}

class WorkflowRun {
public:
    WorkflowRun(const RunSettings& settings, const RunServices& services, const Workflow& workflow,
                const Object& inputs, const Object& secrets, int depth)
        : m_settings(settings),
          m_services(services),
          m_workflow(workflow),
          m_inputs(inputs),
          m_secrets(secrets),
          m_depth(depth) {}

    WorkflowReport run() {
        WorkflowReport report;
        report.file = m_workflow.file;
        report.name = m_workflow.display_name();
        const auto selected = selected_jobs();
        std::vector<std::thread> threads;
        for (const auto& job : m_workflow.jobs) {
            if (std::ranges::find(selected, job.id) == selected.end()) continue;
            threads.emplace_back([this, &job] { run_job(job); });
        }
        for (auto& thread : threads) thread.join();
        for (const auto& job : m_workflow.jobs) {
            auto it = m_reports.find(job.id);
            if (it == m_reports.end()) continue;
            for (auto& leg : it->second) {
                if (leg.conclusion == Outcome::failure)
                    report.conclusion = Outcome::failure;
                else if (leg.conclusion == Outcome::cancelled &&
                         report.conclusion == Outcome::success)
                    report.conclusion = Outcome::cancelled;
                report.jobs.push_back(std::move(leg));
            }
        }
        return report;
    }

private:
    // -j JOB (top level only): the job and everything it needs, transitively.
    std::vector<std::string> selected_jobs() const {
        std::vector<std::string> out;
        if (m_depth > 0 || m_settings.job_filter.empty()) {
            for (const auto& job : m_workflow.jobs) out.push_back(job.id);
            return out;
        }
        std::vector<std::string> pending = m_settings.job_filter;
        while (!pending.empty()) {
            const std::string id = pending.back();
            pending.pop_back();
            const Job* job = m_workflow.find_job(id);
            if (job == nullptr || std::ranges::find(out, id) != out.end()) continue;
            out.push_back(id);
            for (const auto& need : job->needs) pending.push_back(need);
        }
        return out;
    }

    void finish(const Job& job, JobOutcome outcome, std::vector<JobReport> reports) {
        std::lock_guard lock(m_mutex);
        m_outcomes[job.id] = std::move(outcome);
        m_reports[job.id] = std::move(reports);
        m_done.notify_all();
    }

    // Waits for every job `job` needs, then returns the needs context and the status the
    // status functions see, over all ancestors (RunStatus, jobs/expr/expr.hpp).
    Object wait_needs(const Job& job, RunStatus& status) {
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [&] {
            return std::ranges::all_of(
                job.needs, [&](const std::string& id) { return m_outcomes.contains(id); });
        });
        Object needs;
        for (const auto& id : job.needs) {
            const JobOutcome& outcome = m_outcomes.at(id);
            needs.set(id, job_result_entry(outcome.result, outcome.outputs));
        }
        bool failed = false, cancelled = false, skipped = false;
        for (const auto& id : ancestors(job)) {
            const Outcome result = m_outcomes.at(id).result;
            failed = failed || result == Outcome::failure;
            cancelled = cancelled || result == Outcome::cancelled;
            skipped = skipped || result == Outcome::skipped;
        }
        status = failed      ? RunStatus::failure
                 : cancelled ? RunStatus::cancelled
                 : skipped   ? RunStatus::skipped
                             : RunStatus::success;
        return needs;
    }

    std::vector<std::string> ancestors(const Job& job) const {
        std::vector<std::string> out;
        std::vector<std::string> pending = job.needs;
        while (!pending.empty()) {
            std::string id = pending.back();
            pending.pop_back();
            if (std::ranges::find(out, id) != out.end()) continue;
            out.push_back(id);
            if (const Job* need = m_workflow.find_job(id))
                pending.insert(pending.end(), need->needs.begin(), need->needs.end());
        }
        return out;
    }

    EvalContext job_context(const Job& job, const Object& needs, RunStatus status) const {
        return job_eval_context(JobScope{m_settings, m_workflow, job, needs, m_inputs, m_secrets},
                                status);
    }

    JobReport job_report(const Job& job, Outcome outcome, std::string message,
                         AnnotationLevel level) {
        JobReport report;
        report.id = job.id;
        report.name = job.name ? job.name->value : job.id;
        report.outcome = report.conclusion = outcome;
        report.message = m_services.masker.mask(message);
        Annotation a = notice(report.message);
        a.level = level;
        report.annotations.push_back(a);
        m_services.log.annotation(StepLabel{report.name, ""}, a);
        return report;
    }

    void run_job(const Job& job) {
        RunStatus status = RunStatus::success;
        const Object needs = wait_needs(job, status);
        if (run_cancelled() && (status == RunStatus::success || status == RunStatus::skipped))
            status = RunStatus::cancelled;
        const EvalContext context = job_context(job, needs, status);
        const std::string condition = job.condition ? job.condition->value : "success()";
        if (status == RunStatus::skipped &&
            !(job.condition && uses_status_function(job.condition->value))) {
            m_services.log.status(StepLabel{job.id, ""}, StatusKind::skipped,
                                  "job " + job.id + " (a job it needs was skipped)");
            return finish(
                job, {},
                {job_report(job, Outcome::skipped,
                            "skipped: a job it needs (directly or through another) was skipped",
                            AnnotationLevel::notice)});
        }
        auto run_it =
            condition_at(condition, job.condition ? job.condition->mark : job.mark, context);
        if (!run_it) {
            return finish(job, {Outcome::failure, {}},
                          {job_report(job, Outcome::failure, run_it.error().message,
                                      AnnotationLevel::error)});
        }
        if (!*run_it && run_cancelled()) {
            // actions/runner concludes the jobs a cancelled run never started as cancelled.
            return finish(job, {Outcome::cancelled, {}},
                          {job_report(job, Outcome::cancelled, "cancelled: the run was cancelled",
                                      AnnotationLevel::notice)});
        }
        if (!*run_it) {
            m_services.log.status(StepLabel{job.id, ""}, StatusKind::skipped,
                                  "job " + job.id + " (if: " + condition + ")");
            return finish(job, {},
                          {job_report(job, Outcome::skipped, "skipped: if: " + condition,
                                      AnnotationLevel::notice)});
        }
        run_legs(job, needs, context);
    }

    JobReport run_leg(const Job& job, const Leg& leg, const Object& needs, const EvalContext& base,
                      const sandbox::CancelToken* cancel) {
        const EvalContext context = leg_context(base, leg);
        LegInput input;
        input.workflow = &m_workflow;
        input.job = &job;
        input.matrix = leg.matrix;
        input.strategy = leg.strategy;
        input.needs = needs;
        input.inputs = m_inputs;
        input.secrets = m_secrets;
        input.name = leg_name(job, leg, context);
        input.cancel = cancel;
        if (job.calls_workflow()) return call_workflow(job, input, context);
        auto placement = place_leg(job, context, m_settings);
        if (!placement)
            return leg_error(job, input, Outcome::failure, placement.error().message,
                             AnnotationLevel::error);
        input.runs_on = placement->runs_on;
        if (placement->refusal) {
            return leg_error(job, input, Outcome::skipped, "skipped: " + *placement->refusal,
                             AnnotationLevel::notice);
        }
        auto workspace = m_services.workspace.workspace_for(input.name);
        if (!workspace)
            return leg_error(job, input, Outcome::failure, workspace.error().message,
                             AnnotationLevel::error);
        input.workspace = *workspace;
        if (job.steps.empty())
            return leg_error(job, input, Outcome::failure, "the job has no steps",
                             AnnotationLevel::error);
        m_services.legs.acquire();
        JobReport report = run_job_leg(m_settings, m_services, input);
        m_services.legs.release();
        return report;
    }

    JobReport leg_error(const Job& job, const LegInput& input, Outcome outcome,
                        const std::string& message, AnnotationLevel level) {
        JobReport report = job_report(job, outcome, message, level);
        report.name = m_services.masker.mask(input.name);
        report.matrix = input.matrix;
        return report;
    }

    JobReport call_workflow(const Job& job, const LegInput& input, const EvalContext& context) {
        if (m_depth + 1 > k_max_workflow_depth)
            return leg_error(job, input, Outcome::failure,
                             "reusable workflows nest deeper than 4 levels",
                             AnnotationLevel::error);
        auto called = load_called_workflow(m_settings.repository, job);
        if (!called)
            return leg_error(job, input, Outcome::failure, called.error().message,
                             AnnotationLevel::error);
        auto arguments = call_arguments(job, *called, context, m_secrets);
        if (!arguments)
            return leg_error(job, input, Outcome::failure, arguments.error().message,
                             AnnotationLevel::error);
        const auto started = std::chrono::steady_clock::now();
        m_services.log.status(StepLabel{input.name, ""}, StatusKind::start,
                              "call " + job.uses->value);
        WorkflowReport nested = run_workflow(m_settings, m_services, *called, arguments->inputs,
                                             arguments->secrets, m_depth + 1);
        JobReport report;
        report.id = job.id;
        report.name = m_services.masker.mask(input.name);
        report.matrix = input.matrix;
        report.workflow_call = job.uses->value;
        report.outcome = report.conclusion = nested.conclusion;
        CallOutputs outputs =
            evaluate_call_outputs(*called, nested.jobs, arguments->inputs, context);
        report.outputs = std::move(outputs.values);
        for (const auto& error : outputs.errors)
            report.annotations.push_back(notice(m_services.masker.mask(error)));
        report.jobs = std::move(nested.jobs);
        report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - started);
        return report;
    }

    // The tokens a job's legs run under.
    struct LegTokens {
        const sandbox::CancelToken* fail_fast =
            nullptr;  // fired by the first failed leg; never the run's own token
        const sandbox::CancelToken* cancel = nullptr;  // what the legs' steps watch
    };

    // fail-fast: the first failed leg cancels the legs still running (their process trees
    // are stopped through the sandbox) and the ones not started yet. Without an eventfd (fd
    // limit) there is no token: only the legs not started yet are cancelled. The token is
    // linked to the whole run's, so that either stops the leg's steps.
    static std::optional<sandbox::CancelToken> make_fail_fast_token(
        const sandbox::CancelToken* run_token) {
        auto made = run_token != nullptr ? sandbox::CancelToken::create_linked(*run_token)
                                         : sandbox::CancelToken::create();
        if (!made) return std::nullopt;
        return std::move(*made);
    }

    void run_legs(const Job& job, const Object& needs, const EvalContext& context) {
        auto plan = plan_legs(job, context, m_settings);
        if (!plan) {
            return finish(
                job, {Outcome::failure, {}},
                {job_report(job, Outcome::failure, plan.error().message, AnnotationLevel::error)});
        }
        // A job that starts once the run is cancelled (its if called always() or cancelled())
        // runs without the run's token, as such steps do.
        const sandbox::CancelToken* run_token = run_cancelled() ? nullptr : m_services.cancel;
        std::optional<sandbox::CancelToken> fail_fast_token;
        if (plan->fail_fast) fail_fast_token = make_fail_fast_token(run_token);
        LegTokens tokens;
        tokens.fail_fast = fail_fast_token ? &*fail_fast_token : nullptr;
        tokens.cancel = tokens.fail_fast != nullptr ? tokens.fail_fast : run_token;
        std::vector<JobReport> reports = run_leg_pool(job, *plan, needs, context, tokens);
        JobOutcome outcome = combine_legs(reports);
        finish(job, std::move(outcome), std::move(reports));
    }

    // Runs the legs on min(legs, max-parallel) workers, this thread being one of them. With
    // fail-fast, once a leg failed the legs not started yet conclude cancelled.
    std::vector<JobReport> run_leg_pool(const Job& job, const LegPlan& plan, const Object& needs,
                                        const EvalContext& context, const LegTokens& tokens) {
        const std::vector<Leg>& legs = plan.legs;
        std::vector<JobReport> reports(legs.size());
        std::mutex mutex;
        std::size_t next = 0;
        bool failed = false;
        auto worker = [&] {
            for (;;) {
                std::size_t index = 0;
                {
                    std::lock_guard lock(mutex);
                    if (next >= legs.size()) return;
                    index = next++;
                    if (failed && plan.fail_fast) {
                        reports[index] =
                            job_report(job, Outcome::cancelled,
                                       "cancelled: another leg of the matrix failed (fail-fast)",
                                       AnnotationLevel::notice);
                        reports[index].matrix = legs[index].matrix;
                        continue;
                    }
                }
                JobReport report = run_leg(job, legs[index], needs, context, tokens.cancel);
                std::lock_guard lock(mutex);
                if (report.conclusion == Outcome::failure) {
                    failed = true;
                    if (tokens.fail_fast != nullptr) tokens.fail_fast->cancel();
                }
                reports[index] = std::move(report);
            }
        };
        const std::size_t workers =
            std::min(legs.size(), plan.max_parallel == 0 ? legs.size() : plan.max_parallel);
        std::vector<std::thread> threads;
        for (std::size_t i = 1; i < workers; ++i) threads.emplace_back(worker);
        worker();
        for (auto& thread : threads) thread.join();
        return reports;
    }

    // The job's result over its legs: failure if any failed, else cancelled if any was,
    // else success if any succeeded, else skipped. Its outputs: per name, the last leg's
    // non-empty value (an empty one only where no leg set the name before).
    static JobOutcome combine_legs(const std::vector<JobReport>& reports) {
        JobOutcome outcome;
        bool any_success = false, any_failure = false, any_cancelled = false;
        for (const auto& report : reports) {
            any_success = any_success || report.conclusion == Outcome::success;
            any_failure = any_failure || report.conclusion == Outcome::failure;
            any_cancelled = any_cancelled || report.conclusion == Outcome::cancelled;
            for (const auto& [name, value] : report.outputs) {
                if (!value.empty() || find_named(outcome.outputs, name) == nullptr)
                    set_named(outcome.outputs, name, value);
            }
        }
        outcome.result = any_failure     ? Outcome::failure
                         : any_cancelled ? Outcome::cancelled
                         : any_success   ? Outcome::success
                                         : Outcome::skipped;
        return outcome;
    }

    bool run_cancelled() const {
        return m_services.cancel != nullptr && m_services.cancel->cancelled();
    }

    const RunSettings& m_settings;
    const RunServices& m_services;
    const Workflow& m_workflow;
    const Object m_inputs;
    const Object m_secrets;
    const int m_depth;
    std::mutex m_mutex;
    std::condition_variable m_done;
    std::map<std::string, JobOutcome> m_outcomes;
    std::map<std::string, std::vector<JobReport>> m_reports;
};

}  // namespace

WorkflowReport run_workflow(const RunSettings& settings, const RunServices& services,
                            const Workflow& workflow, const Object& inputs, const Object& secrets,
                            int depth) {
    WorkflowRun run(settings, services, workflow, inputs, secrets, depth);
    return run.run();
}

}  // namespace jobs
