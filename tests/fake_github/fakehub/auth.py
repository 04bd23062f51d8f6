"""Tokens: configured static ones, installation tokens it issues (held to their scope, expiring
by the server's clock) and App JWTs on /app/."""

import datetime
import re

from .state import APP_PERMISSIONS, DOCS, LEVELS, MAX_TOKEN_REPOSITORIES, WRITE_PERMISSIONS


class Auth:
    """Tokens: static ones, installation tokens it issues (scoped, expiring) and JWTs."""

    def bearer(self):
        header = self.headers.get("Authorization", "")
        return header[len("Bearer "):] if header.startswith("Bearer ") else None

    def issued_token(self):
        token = self.bearer()
        state = self.server.state
        with state.lock:
            for issued in state.issued:
                if issued["token"] == token:
                    return issued
        return None

    def scope_problem(self, method, path):
        """(status, message) when an installation token's scope does not cover the request."""
        issued = self.issued_token()
        repo = re.match(r"^/repos/([^/]+)/([^/]+)", path)
        if issued is None or repo is None:
            return None
        names = issued.get("repositories")
        if names is not None and repo.group(2).lower() not in [n.lower() for n in names]:
            return 404, "Not Found"
        needed = WRITE_PERMISSIONS.get(self.template_of(path))
        if method in ("POST", "PATCH", "PUT", "DELETE") and needed:
            if LEVELS.get(issued["permissions"].get(needed), 0) < LEVELS["write"]:
                return 403, "Resource not accessible by integration"
        return None

    def token_scope_problem(self, document):
        """The 422 message for an access-token body GitHub refuses beyond its schema, or None."""
        names = document.get("repositories") or []
        ids = document.get("repository_ids") or []
        if len(names) + len(ids) > MAX_TOKEN_REPOSITORIES:
            return "repositories: more than %d repositories" % MAX_TOKEN_REPOSITORIES
        for name, level in (document.get("permissions") or {}).items():
            if LEVELS.get(level, 0) > LEVELS.get(APP_PERMISSIONS.get(name), 0):
                return ("The permissions requested are not granted to this installation "
                        "(%s: %s)" % (name, level))
        return None

    def token_ok(self, path):
        token = self.bearer()
        if token is None:
            return False
        if path.startswith("/app/"):
            return token.count(".") == 2  # a JWT; the C++ test verifies its signature
        state = self.server.state
        with state.lock:
            if token in state.tokens:
                return True
            for issued in state.issued:
                if issued["token"] == token and issued["expires_epoch"] > state.now():
                    return True
        return False

    def op_post_access_tokens(self, params, query, document):
        problem = self.token_scope_problem(document)
        if problem:
            return self.error(422, problem, DOCS + "/apps/apps#create-an-installation-access-token-for-an-app")
        requested = document
        if self.server.state.ignore_token_scope:
            document = {}
        permissions = dict(document.get("permissions") or APP_PERMISSIONS)
        permissions.setdefault("metadata", "read")  # GitHub adds it to every token
        names = document.get("repositories")
        state = self.server.state
        with state.lock:
            state.next_id += 1
            token = "ghs_fake%dinstallation%s" % (state.next_id, params["installation_id"])
            expires = state.now() + state.token_ttl
            state.issued.append({"token": token, "installation_id": params["installation_id"],
                                 "expires_epoch": expires, "jwt": self.bearer(),
                                 "permissions": permissions, "repositories": names,
                                 "request": requested})
        expires_at = datetime.datetime.fromtimestamp(expires, datetime.timezone.utc)
        answer = {"token": token, "expires_at": expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "permissions": permissions,
                  "repository_selection": "selected" if names is not None or
                  document.get("repository_ids") is not None else "all"}
        if names is not None:
            answer["repositories"] = [{"name": name} for name in names]
        self.answer(201, answer)
