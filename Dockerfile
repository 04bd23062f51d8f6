# sandgate agent image: build stage on Debian 12 (the product only, scripts/build-product.sh:
# no tests, no Catch2), runtime stage with bubblewrap.
#
# Running it: bwrap inside a container needs user namespaces and mount permissions that
# default seccomp/AppArmor profiles refuse. See README.md "In a container (Dockerfile)" for
# the flags (for example: --security-opt seccomp=unconfined --security-opt apparmor=unconfined;
# --cap-add SYS_ADMIN is NOT needed when unprivileged user namespaces are allowed).
# The configuration is /etc/sandgate/sandgate-agent.yaml; its secret files (0600) are owned
# on the host by uid/gid 10001, the image's `sandgate` user.

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh --product
COPY . .
RUN SANDGATE_BUILD_DIR=/build ./scripts/build-product.sh \
 && strip /build/sandgate /build/sandgate-full /build/sandgate-broker /build/sandgate-agent

FROM debian:12-slim AS runtime
ARG SANDGATE_VERSION=0.1.0
ARG SANDGATE_REVISION=unknown
LABEL org.opencontainers.image.title="sandgate" \
      org.opencontainers.image.description="A CI runner agent for merge gates: every step in a bubblewrap sandbox" \
      org.opencontainers.image.source="https://github.com/sandgate/sandgate" \
      org.opencontainers.image.documentation="https://github.com/sandgate/sandgate#in-a-container-dockerfile" \
      org.opencontainers.image.version="${SANDGATE_VERSION}" \
      org.opencontainers.image.revision="${SANDGATE_REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:12-slim"
# Runtime libraries of the sandgate binary (tests/integration/test_dockerfile.cpp checks this list
# against the binary's shared-library needs; libpq5 is loaded at run time by an agent of a
# PostgreSQL pool), bubblewrap for the wrap, git for steps. The user's uid/gid are fixed
# (10001) so that files mounted from the host (0600 secrets) can be owned by it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bubblewrap ca-certificates git python3 \
      libcurl4 libgit2-1.5 libsimdjson14 libspdlog1.10 libfmt9 libyaml-0-2 \
      libseccomp2 libsqlite3-0 libssl3 libmicrohttpd12 libpq5 libarchive13 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 sandgate \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /var/lib/sandgate \
      --shell /usr/sbin/nologin sandgate
# `sandgate` is the launcher; it starts `sandgate-full`, `sandgate-broker` and `sandgate-agent`,
# which must sit beside it.
COPY --from=build /build/sandgate /build/sandgate-full /build/sandgate-broker /build/sandgate-agent /usr/local/bin/
USER 10001:10001
ENV XDG_STATE_HOME=/var/lib/sandgate/state
VOLUME ["/var/lib/sandgate"]
# GET /healthz on the agent's API socket (found from the configuration); exit 0 healthy, 3 the
# agent cannot be reached, 1 it answered with an error. For an agent listening on
# 127.0.0.1:PORT, override it: sandgate jobs --url http://127.0.0.1:PORT health
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/sandgate", "jobs", "--config", "/etc/sandgate/sandgate-agent.yaml", "health"]
ENTRYPOINT ["/usr/local/bin/sandgate"]
CMD ["agent", "--config", "/etc/sandgate/sandgate-agent.yaml"]
