#!/bin/sh
# The image's entrypoint (under tini): files in a shared store folder stay writable by every
# worker of the host, whichever uid it runs as (the folder is setgid, group skilleval).
umask 0002
exec skill-eval "$@"
