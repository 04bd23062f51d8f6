"""Shared state of the fake GitHub: what it was configured with, what it keeps, its clock."""

import datetime
import threading
import time

DOCS = "https://docs.github.com/rest"
MAX_ANNOTATION_TITLE = 255
MAX_ANNOTATION_BLOB = 64 * 1024
MAX_TOKEN_REPOSITORIES = 500
# What the fake App's installation was granted; an installation token gets all of it unless
# its request narrows it.
APP_PERMISSIONS = {"checks": "write", "statuses": "write", "contents": "read",
                   "metadata": "read", "pull_requests": "read"}
LEVELS = {"read": 1, "write": 2, "admin": 3}
# The permission a write needs, by path template (what reporting uses).
WRITE_PERMISSIONS = {"check_run": "checks", "check_runs": "checks", "statuses": "statuses"}


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class State:
    def __init__(self, tokens):
        self.lock = threading.Lock()
        self.tokens = set(tokens)
        self.token_ttl = 3600
        # Seconds added to the wall clock when installation tokens are issued and checked: a
        # test moves the server an hour ahead to expire the tokens a client holds.
        self.clock_offset = 0
        self.ignore_token_scope = False
        self.clear()

    def now(self):
        """The server's clock for installation tokens (epoch seconds)."""
        return time.time() + self.clock_offset

    def clear(self):
        self.check_runs = {}
        self.statuses = []
        self.issued = []
        self.repos = {}  # "owner/name" -> {"pulls": [...], "refs": [...], "clone_url": URL}
        self.rate_remaining = 5000
        self.faults = []
        self.requests = []
        self.next_id = 4000000000  # beyond 2^31: ids are int64 on GitHub
