"""git's smart HTTP (git http-backend as CGI) for the repositories under --git-root, read-only,
behind GitHub's rules for https clones: HTTP Basic auth whose password is a token (any user
name, `x-access-token` by convention). A configured token reads everything; an installation
token it issued reads a repository while it has not expired (by the server's clock, see
/_control/config clock_offset), when its repositories include it and it holds contents:read.
Anything else gets 401 with a Basic challenge, as github.com answers a private repository.

Served paths: /OWNER/NAME.git/info/refs?service=git-upload-pack and
/OWNER/NAME.git/git-upload-pack, for GIT_PROJECT_ROOT/OWNER/NAME.git. Pushes are refused.
"""

import re

import git_cgi  # tests/helpers, put on sys.path by server.py

from .state import LEVELS

GIT_PATH = re.compile(r"^/([^/]+)/([^/]+?)\.git/(info/refs|git-upload-pack)$")


class GitHttp:
    """The git route of the handler (the server's git_root is None when it is off)."""

    def is_git_path(self, path):
        return self.server.git_root is not None and GIT_PATH.match(path) is not None

    def git_token_ok(self, repository):
        token = git_cgi.basic_password(self.headers)
        if token is None:
            return False
        state = self.server.state
        with state.lock:
            if token in state.tokens:
                return True
            for issued in state.issued:
                if issued["token"] != token or issued["expires_epoch"] <= state.now():
                    continue
                names = issued.get("repositories")
                if names is not None and repository.lower() not in [n.lower() for n in names]:
                    return False
                return LEVELS.get(issued["permissions"].get("contents"), 0) >= LEVELS["read"]
        return False

    def git(self, method, parsed, body):
        found = GIT_PATH.match(parsed.path)
        if method not in ("GET", "POST") or "receive-pack" in parsed.query:
            return self.error(403, "Write access to repository not granted.")
        if not self.git_token_ok(found.group(2)):
            self.record["status"] = 401
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self.run_backend(method, parsed, body)

    def run_backend(self, method, parsed, body):
        def record(status):  # before the answer leaves, like every other route
            self.record["status"] = status
        git_cgi.answer_with_backend(self, self.server.git_root, method, parsed.path, parsed.query,
                                    body, before_send=record)
        return None
