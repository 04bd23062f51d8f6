# sandgate agent image: build stage on Debian 12, runtime stage with bubblewrap.
#
# Running it: bwrap inside a container needs user namespaces and mount permissions that
# default seccomp/AppArmor profiles refuse. See README.md "Running in a container" for the
# flags (for example: --security-opt seccomp=unconfined --security-opt apparmor=unconfined
# --cap-add SYS_ADMIN is NOT needed when unprivileged user namespaces are allowed).

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSANDGATE_WERROR=OFF \
 && cmake --build /build --target sandgate \
 && strip /build/sandgate /build/sandgate-full /build/sandgate-broker /build/sandgate-agent

FROM debian:12-slim AS runtime
# Runtime libraries of the sandgate binary (tests/test_dockerfile.cpp checks this list
# against the binary's shared-library needs; libpq5 is loaded at run time by an agent of a
# PostgreSQL pool), bubblewrap for the wrap, git for steps.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bubblewrap ca-certificates git python3 \
      libcurl4 libgit2-1.5 libsimdjson14 libspdlog1.10 libfmt9 libyaml-0-2 \
      libseccomp2 libsqlite3-0 libssl3 libmicrohttpd12 libpq5 libarchive13 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/sandgate --shell /usr/sbin/nologin sandgate
# `sandgate` is the launcher; it starts `sandgate-full`, `sandgate-broker` and `sandgate-agent`,
# which must sit beside it.
COPY --from=build /build/sandgate /build/sandgate-full /build/sandgate-broker /build/sandgate-agent /usr/local/bin/
USER sandgate
ENV XDG_STATE_HOME=/var/lib/sandgate/state
VOLUME ["/var/lib/sandgate"]
ENTRYPOINT ["/usr/local/bin/sandgate"]
CMD ["agent", "--config", "/etc/sandgate/agent.yml"]
