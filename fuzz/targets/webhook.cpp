// GitHub webhook payloads (agent/daemon/webhook_events.hpp): the first line names the event, the
// rest is the body. Also the signature check over the same bytes.
#include "github/webhook.hpp"

#include "agent/daemon/webhook_events.hpp"
#include "fuzz/fuzz_target.hpp"

SANDGATE_FUZZ_TARGET(webhook) {
    const std::string_view input = fuzz::text(data, size);
    const auto newline = input.find('\n');
    const std::string_view event = newline == std::string_view::npos
                                       ? std::string_view("pull_request")
                                       : input.substr(0, newline);
    const std::string_view body =
        newline == std::string_view::npos ? input : input.substr(newline + 1);
    agent::WebhookFilter filter;
    filter.pr_label = "gate";
    filter.repositories = {"octo/repo"};
    auto action = agent::webhook_action(event, body, filter);
    if (!action) fuzz::check_one_line(action.error().message);
    (void)github::verify_webhook_signature("secret", body, event);
    return 0;
}
