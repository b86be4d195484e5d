"""A node that has its orders boots and sends its first call before the shards' modules load.

The warm-up thread imports Celery's boot modules and what the first call needs (the model
client, the preflight, the direct transport's TLS context, litellm when a model may go
through it) at once; the shards' modules (executor, judge, workspace, ...) wait while the
node boots, until its first task begins or HOLD_MAX_S passes, so that they do not take the
interpreter's lock from the boot's path.
Each case runs in a fresh interpreter: what is imported is the thing under test.
"""

from __future__ import annotations

import subprocess
import sys

from schemas.constants import LITELLM_PRELOAD_ENV

PROBE = """
import sys, time
from worker import warmup
{setup}
warmup.hold_heavy_imports()
thread = warmup.start_warmup()
deadline = time.monotonic() + 60
while {first} not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.5)  # well past the first call's modules: the warm-up would be into the shards' by now
held = "worker.executor.agent" not in sys.modules and not warmup.imported()
{release}
thread.join(60)
print(held, "worker.executor.agent" in sys.modules, warmup.imported())
"""


def _probe(setup: str = "", release: str = "warmup.release_heavy_imports()", *, litellm: bool = False) -> list[str]:
    code = PROBE.format(setup=setup, release=release, first=repr("litellm" if litellm else "worker.preflight"))
    env_code = f"import os; os.environ['{LITELLM_PRELOAD_ENV}'] = '{int(litellm)}'\n{code}"
    done = subprocess.run([sys.executable, "-P", "-c", env_code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_a_booting_node_holds_the_shards_modules_until_its_first_task() -> None:
    assert _probe() == ["True", "True", "True"]


def test_litellm_is_not_held_back_a_model_routed_through_it_makes_the_first_call_with_it() -> None:
    assert _probe(litellm=True) == ["True", "True", "True"]


def test_a_node_given_no_task_loads_them_anyway_once_the_hold_runs_out() -> None:
    assert _probe(setup="warmup.HOLD_MAX_S = 1.5", release="") == ["True", "True", "True"]


def test_a_process_that_does_not_hold_imports_everything_at_once() -> None:
    code = (
        f"import os, sys; os.environ['{LITELLM_PRELOAD_ENV}'] = '0'\n"
        "from worker import warmup\n"
        "warmup.start_warmup().join(60)\n"
        "print('worker.executor.agent' in sys.modules, warmup.imported())"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]
