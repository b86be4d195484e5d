# skill-eval: one image for `skill-eval worker` on every queue and for the producer CLI.
#
#   docker build --network host --build-arg BASE_IMAGE=skill-eval-base:bookworm -t skill-eval .
#
# BASE_IMAGE is any Debian bookworm root filesystem (debian:bookworm-slim from a registry, or
# one made locally by deploy/make-base-image.sh where no registry is reachable).
# Who runs as whom (image user, sandbox throwaway uids, agents): docs/design/deployment.md.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/skill-eval/bin:$PATH

# Python, and what the sandbox and the workspaces need: git (fixtures, baselines), bubblewrap
# (the sandbox), util-linux (prlimit and setpriv: per-command limits, dropping to a throwaway
# uid), tini (PID 1 that reaps orphans of sandboxed commands and forwards SIGTERM).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates git bubblewrap util-linux tini procps \
 && rm -rf /var/lib/apt/lists/*

# Extra CA certificates (PEM text) for sites whose egress goes through a TLS-inspecting proxy:
#   --build-arg EXTRA_CA_CERTS="$(cat /usr/local/share/ca-certificates/*.crt)"
# pip and npm below are told to use the system bundle, which then includes them.
ARG EXTRA_CA_CERTS=""
RUN if [ -n "$EXTRA_CA_CERTS" ]; then \
      printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra.crt && update-ca-certificates; \
    fi
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

# Dependencies first (cached while only the code changes), then the product itself; Flower for
# the one-host compose's monitoring page.
COPY pyproject.toml /src/
RUN python3 -m venv /opt/skill-eval \
 && mkdir -p /tmp/deps && cd /src \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > /tmp/deps/requirements.txt \
 && echo "flower>=2" >> /tmp/deps/requirements.txt \
 && /opt/skill-eval/bin/pip install -q -r /tmp/deps/requirements.txt \
 && rm -rf /tmp/deps
# ---- OPTIONAL: pinned agent harnesses (Claude Code, Codex, OpenCode, Gemini CLI, Copilot)
# Off by default (+1.6 GB, 1.5 min to build here): `--build-arg AGENT_HARNESSES=1` installs npm from
# Debian, Node.js 22 from the npm registry (Claude Code needs >= 22; bookworm has 18), ripgrep
# (OpenCode searches with it) and the pinned CLIs, the Makefile's versions (a test holds them
# equal). They run only inside the sandbox, as a throwaway uid.
ARG AGENT_HARNESSES=0
RUN if [ "$AGENT_HARNESSES" = 1 ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends nodejs npm ripgrep \
      && npm install -g --no-fund --no-audit node@22 \
      && npm install -g --no-fund --no-audit @anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0 \
         opencode-ai@1.18.33 @google/gemini-cli@0.61.0 \
         @github/copilot@1.0.102 \
      && npm cache clean --force \
      && rm -rf /var/lib/apt/lists/* /root/.npm; \
    fi
# -------------------------------------------------------------------------------------------

COPY README.md /src/
COPY schemas /src/schemas
COPY engine /src/engine
COPY harnesses /src/harnesses
COPY reducer /src/reducer
COPY producer /src/producer
COPY worker /src/worker
COPY prompts /src/prompts
COPY testkit /src/testkit
COPY viewer /src/viewer
RUN /opt/skill-eval/bin/pip install -q --no-deps /src && rm -rf /src
COPY deploy/entrypoint.sh /usr/local/bin/skill-eval-entrypoint
COPY deploy/check-isolation.sh /usr/local/bin/skill-eval-check-isolation

# The image user. Producers and grade/reduce workers run as it; execute workers start as
# root inside a user-namespaced container so each sandbox can drop to a throwaway uid
# (never this one, never root): see docs/design/deployment.md.
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/skilleval skilleval \
 && mkdir -p /var/lib/skill-eval/work /var/lib/skill-eval/store \
 && chown -R 10001:10001 /var/lib/skill-eval \
 && chmod 2775 /var/lib/skill-eval/store
ENV SKILL_EVAL_WORKDIR=/var/lib/skill-eval/work \
    SKILL_EVAL_STORE=/var/lib/skill-eval/store
USER 10001
WORKDIR /home/skilleval

HEALTHCHECK --interval=30s --timeout=20s --start-period=60s --retries=3 \
  CMD ["skill-eval", "worker", "--health"]
ENTRYPOINT ["tini", "--", "skill-eval-entrypoint"]
CMD ["worker"]
