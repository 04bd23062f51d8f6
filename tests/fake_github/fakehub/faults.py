"""Queued faults (POST /_control/faults), applied to the API requests whose path matches."""

import time


class Faults:
    """Queued faults (POST /_control/faults) applied to matching API requests."""

    def apply_fault(self, path):
        state = self.server.state
        with state.lock:
            fault = None
            for candidate in state.faults:
                if candidate.get("match", "") in path and candidate.get("count", 1) > 0:
                    candidate["count"] = candidate.get("count", 1) - 1
                    fault = dict(candidate)
                    break
            state.faults = [f for f in state.faults if f.get("count", 1) > 0]
        if fault is None:
            return False
        kind = str(fault["kind"])
        self.record["fault"] = kind
        if kind == "500":
            self.error(500, "Server Error")
        elif kind == "502":
            self.answer(502, raw=b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        elif kind == "429":
            self.error(429, "Too Many Requests",
                       headers={"Retry-After": str(fault.get("retry_after", 1))})
        elif kind == "secondary":
            headers = {}
            if "retry_after" in fault:
                headers["Retry-After"] = str(fault["retry_after"])
            self.error(403, "You have exceeded a secondary rate limit. Please wait a few "
                       "minutes before you try again.",
                       docs="https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                       "#about-secondary-rate-limits", headers=headers)
        elif kind == "primary":
            reset = int(time.time()) + int(fault.get("reset_in", 2))
            self.error(403, "API rate limit exceeded for installation ID 1.",
                       headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
        elif kind == "slow":
            time.sleep(float(fault.get("delay", 5)))
            return False
        elif kind == "reset":
            self.reset_connection()
        elif kind == "401":
            self.error(401, "Bad credentials")
        elif kind == "404":
            self.error(404, "Not Found")
        elif kind == "422":
            self.error(422, "Validation Failed", errors=[{"resource": "CheckRun", "code": "invalid",
                                                          "field": "output"}])
        else:
            self.error(500, "unknown fault kind " + kind)
        return True
