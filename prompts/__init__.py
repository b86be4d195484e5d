"""Prompt templates as plain, versioned files; every result records the hash of each one used."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Template:
    """A prompt template file and the SHA-256 of its exact bytes."""

    name: str
    text: str
    sha256: str


@cache
def load_template(name: str) -> Template:
    """Load ``prompts/<name>.md``; raise FileNotFoundError when it does not exist."""
    data = resources.files(__name__).joinpath(f"{name}.md").read_bytes()
    return Template(name=name, text=data.decode("utf-8"), sha256=hashlib.sha256(data).hexdigest())
