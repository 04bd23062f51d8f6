"""Check runs (annotations appended across PATCHes) and commit statuses, kept in memory."""

import urllib.parse

from .state import now_iso


class CheckRuns:
    """Check runs and commit statuses, kept in memory."""

    def run_view(self, run):
        view = {key: value for key, value in run.items() if key not in ("annotations", "repo", "updates")}
        output = run["output"]
        view["output"] = {"title": output.get("title"), "summary": output.get("summary"),
                          "text": output.get("text"),
                          "annotations_count": len(run["annotations"]),
                          "annotations_url": view["url"] + "/annotations"}
        return view

    def op_post_check_runs(self, params, query, document):
        state = self.server.state
        with state.lock:
            state.next_id += 1
            run_id = state.next_id
            status = document.get("status", "queued")
            if "conclusion" in document:
                status = "completed"
            url = "%s/repos/%s/%s/check-runs/%d" % (self.base_url(), params["owner"],
                                                    params["repo"], run_id)
            run = {"id": run_id, "node_id": "CR_%d" % run_id, "head_sha": document["head_sha"],
                   "external_id": document.get("external_id", ""), "url": url,
                   "html_url": "https://github.example/%s/%s/runs/%d" % (
                       params["owner"], params["repo"], run_id),
                   "details_url": document.get("details_url"), "status": status,
                   "conclusion": document.get("conclusion"),
                   "started_at": document.get("started_at", now_iso()),
                   "completed_at": document.get("completed_at") or (
                       now_iso() if status == "completed" else None),
                   "output": {}, "name": document["name"], "check_suite": {"id": 1},
                   "app": None, "pull_requests": [], "annotations": [],
                   "repo": params["owner"] + "/" + params["repo"], "updates": 0}
            self.apply_output(run, document.get("output"))
            state.check_runs[run_id] = run
            view = self.run_view(run)
        self.answer(201, view)

    @staticmethod
    def apply_output(run, output):
        if not output:
            return
        for key in ("title", "summary", "text"):
            if key in output:
                run["output"][key] = output[key]
        run["annotations"].extend(output.get("annotations") or [])

    def op_patch_check_run(self, params, query, document):
        state = self.server.state
        with state.lock:
            run = state.check_runs.get(int(params["check_run_id"]))
            if run is None or run["repo"] != params["owner"] + "/" + params["repo"]:
                run = None
            else:
                for key in ("name", "details_url", "external_id", "started_at", "status",
                            "conclusion", "completed_at"):
                    if key in document:
                        run[key] = document[key]
                if "conclusion" in document:
                    run["status"] = "completed"
                    run.setdefault("completed_at", None)
                    run["completed_at"] = document.get("completed_at") or now_iso()
                elif document.get("status") in ("queued", "in_progress"):
                    run["conclusion"] = None
                    run["completed_at"] = None
                self.apply_output(run, document.get("output"))
                run["updates"] += 1
                view = self.run_view(run)
        if run is None:
            return self.error(404, "Not Found")
        self.answer(200, view)

    def op_get_ref_check_runs(self, params, query, document):
        state = self.server.state
        name = query.get("check_name", [None])[0]
        status = query.get("status", [None])[0]
        latest = query.get("filter", ["latest"])[0] != "all"
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        ref = urllib.parse.unquote(params["ref"])
        repo = params["owner"] + "/" + params["repo"]
        with state.lock:
            runs = [run for run in sorted(state.check_runs.values(), key=lambda r: -r["id"])
                    if run["repo"] == repo and run["head_sha"] == ref
                    and (name is None or run["name"] == name)
                    and (status is None or run["status"] == status)]
            if latest:
                seen, kept = set(), []
                for run in runs:
                    if run["name"] not in seen:
                        seen.add(run["name"])
                        kept.append(run)
                runs = kept
            chunk = [self.run_view(run) for run in runs[(page - 1) * per_page:page * per_page]]
        headers = {}
        if page * per_page < len(runs):
            nxt = dict((k, v[0]) for k, v in query.items())
            nxt["page"] = str(page + 1)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (
                self.base_url(), urllib.parse.urlsplit(self.path).path,
                urllib.parse.urlencode(nxt))
        self.answer(200, {"total_count": len(runs), "check_runs": chunk}, headers)

    def op_post_statuses(self, params, query, document):
        state = self.server.state
        with state.lock:
            state.next_id += 1
            stamp = now_iso()
            status = {"url": "%s/repos/%s/%s/statuses/%s" % (self.base_url(), params["owner"],
                                                             params["repo"], params["sha"]),
                      "avatar_url": None, "id": state.next_id, "node_id": "SC_%d" % state.next_id,
                      "state": document["state"], "description": document.get("description"),
                      "target_url": document.get("target_url"),
                      "context": document.get("context", "default"), "created_at": stamp,
                      "updated_at": stamp, "creator": None, "sha": params["sha"],
                      "repo": params["owner"] + "/" + params["repo"]}
            state.statuses.append(status)
        self.answer(201, {k: v for k, v in status.items() if k not in ("sha", "repo")})
