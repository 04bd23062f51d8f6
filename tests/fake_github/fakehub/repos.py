"""What the agent polls: pull requests and git references, each answer with an ETag (a
matching If-None-Match gets 304, not counted against the rate limit)."""

import copy
import hashlib
import json
import urllib.parse


class Repos:
    """What the agent polls: pull requests and git references, with ETags."""

    def answer_conditional(self, document, headers=None):
        """200 with an ETag, or 304 (no body, not counted) when If-None-Match names it."""
        etag = 'W/"%s"' % hashlib.sha256(json.dumps(document, sort_keys=True)
                                          .encode("utf-8")).hexdigest()[:40]
        headers = dict(headers or {})
        headers["ETag"] = etag
        wanted = [tag.strip() for tag in self.headers.get("If-None-Match", "").split(",")]
        if etag in wanted or "*" in wanted:
            self.record["not_modified"] = True
            return self.answer(304, None, headers, counted=False)
        self.answer(200, document, headers)

    def repo_of(self, full_name):
        with self.server.state.lock:
            repo = self.server.state.repos.get(full_name)
            return copy.deepcopy(repo) if repo is not None else None

    def pull_view(self, full_name, repo, pull):
        owner, name = full_name.split("/", 1)
        number = int(pull["number"])
        base = self.base_url()
        repository = {"id": 1, "name": name, "full_name": full_name,
                      "clone_url": repo["clone_url"], "owner": {"login": owner}}
        return {"url": "%s/repos/%s/pulls/%d" % (base, full_name, number),
                "id": 1000 + number, "node_id": "PR_%d" % number, "number": number,
                "state": pull.get("state", "open"), "locked": False,
                "title": pull.get("title", "pull request %d" % number),
                "user": {"login": "octocat"}, "draft": bool(pull.get("draft", False)),
                "labels": [{"id": index + 1, "name": label, "color": "ededed",
                            "default": False} for index, label in
                           enumerate(pull.get("labels", []))],
                "head": {"label": owner + ":" + pull.get("ref", "topic"),
                         "ref": pull.get("ref", "topic"), "sha": pull["sha"],
                         "repo": repository, "user": {"login": owner}},
                "base": {"label": owner + ":" + pull.get("base", "main"),
                         "ref": pull.get("base", "main"),
                         "sha": pull.get("base_sha", "0" * 40), "repo": repository,
                         "user": {"login": owner}},
                "html_url": "https://github.example/%s/pull/%d" % (full_name, number)}

    def op_get_pulls(self, params, query, document):
        full_name = params["owner"] + "/" + params["repo"]
        repo = self.repo_of(full_name)
        if repo is None:
            return self.error(404, "Not Found")
        wanted = query.get("state", ["open"])[0]
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        pulls = [pull for pull in sorted(repo["pulls"], key=lambda p: -int(p["number"]))
                 if wanted == "all" or pull.get("state", "open") == wanted]
        chunk = [self.pull_view(full_name, repo, pull)
                 for pull in pulls[(page - 1) * per_page:page * per_page]]
        headers = {}
        if page * per_page < len(pulls):
            nxt = dict((k, v[0]) for k, v in query.items())
            nxt["page"] = str(page + 1)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (
                self.base_url(), urllib.parse.urlsplit(self.path).path,
                urllib.parse.urlencode(nxt))
        self.answer_conditional(chunk, headers)

    def op_get_matching_refs(self, full_name, prefix):
        repo = self.repo_of(full_name)
        if repo is None:
            return self.error(404, "Not Found")
        base = self.base_url()
        refs = [{"ref": ref["ref"], "node_id": "REF_" + ref["ref"],
                 "url": "%s/repos/%s/git/%s" % (base, full_name, ref["ref"]),
                 "object": {"type": "commit", "sha": ref["sha"],
                            "url": "%s/repos/%s/git/commits/%s" % (base, full_name, ref["sha"])}}
                for ref in sorted(repo["refs"], key=lambda r: r["ref"])
                if ref["ref"].startswith("refs/" + prefix)]
        self.answer_conditional(refs)
