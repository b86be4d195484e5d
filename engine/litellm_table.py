"""litellm's bundled model table, read from its package without importing litellm.

litellm ships its table of models (provider, prices, context) as a JSON file inside its
package and loads it when imported: seconds of CPU and over 100 MB a process. The table is
read from that file directly instead (about 50 ms, once per process) by what needs it without
litellm: the prices of a run whose models go straight over HTTP (worker/models/prices.py) and
the command line's check of model names (producer/plan/model_names.py).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

TABLE_FILE = "model_prices_and_context_window_backup.json"
"""litellm's bundled table (what it loads itself under LITELLM_LOCAL_MODEL_COST_MAP)."""


@functools.cache
def bundled_model_table() -> dict[str, dict[str, Any]]:
    """Model name -> its entry; empty when litellm (or its table) is not installed."""
    spec = importlib.util.find_spec("litellm")  # a top-level package: located, not imported
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / TABLE_FILE
        if path.is_file():
            table = json.loads(path.read_text(encoding="utf-8"))
            return table if isinstance(table, dict) else {}
    return {}
