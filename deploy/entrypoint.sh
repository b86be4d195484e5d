#!/bin/sh
# The image's entrypoint (under tini): files in a shared store folder stay writable by every
# worker of the host, whichever uid it runs as (the folder is setgid, group skilleval).
# An executor asked to check its isolation (SKILL_EVAL_EXECUTOR_ISOLATION) refuses to start
# where its root is the host's root (skill-eval-check-isolation).
umask 0002
skill-eval-check-isolation || exit 2
exec skill-eval "$@"
