"""The /_control/ endpoints the tests drive the server with (no auth)."""

import copy
import json


class Control:
    """The /_control/ endpoints (no auth)."""

    def control(self, method, path, body):
        state = self.server.state
        document = json.loads(body) if body else {}
        with state.lock:
            if method == "POST" and path == "/_control/faults":
                if document.get("replace"):
                    state.faults = []
                state.faults.extend(document.get("faults", []))
                reply = {"faults": len(state.faults)}
            elif method == "POST" and path == "/_control/config":
                if "token_ttl" in document:
                    state.token_ttl = int(document["token_ttl"])
                if "clock_offset" in document:
                    state.clock_offset = float(document["clock_offset"])
                state.clock_offset += float(document.get("advance_clock", 0))
                state.ignore_token_scope = bool(document.get("ignore_token_scope", False))
                state.tokens.update(document.get("tokens", []))
                reply = {"ok": True}
            elif method == "POST" and path == "/_control/repo":
                repo = state.repos.setdefault(document["repo"], {
                    "pulls": [], "refs": [], "clone_url": "https://github.example/%s.git" %
                    document["repo"]})
                for key in ("pulls", "refs", "clone_url"):
                    if key in document:
                        repo[key] = document[key]
                reply = {"ok": True}
            elif method == "GET" and path == "/_control/state":
                reply = {"check_runs": [copy.deepcopy(run) for run in
                                        sorted(state.check_runs.values(),
                                               key=lambda run: run["id"])],
                         "statuses": copy.deepcopy(state.statuses),
                         "issued_tokens": copy.deepcopy(state.issued)}
            elif method == "GET" and path == "/_control/requests":
                reply = {"requests": [dict(r) for r in state.requests
                                      if not r["target"].startswith("/_control/")]}
            elif method == "POST" and path == "/_control/clear":
                state.clear()
                reply = {"ok": True}
            else:
                reply = None
        if reply is None:
            self.error(404, "Not Found")
        else:
            self.answer(200, reply)
