"""Whether a command line a harness's stream reports runs exactly the command its model sent.

Codex (0.169) reports each command it ran as one line: the argv it executed (its shell, ``-lc``
and the model's command) joined with the Rust ``shlex`` crate's quoting, which puts a word in
single quotes, in double quotes (escaping ``$``, a backtick, ``"`` and ``\\`` with a backslash),
or bare, or splits a word into such chunks. Python's :func:`shlex.split` does not undo the
double-quote escapes of ``$`` and backticks, so this module reads the line as a POSIX shell
reads words. A claim then matches a call only when the words are the call's command exactly:
a substring test would let a reported ``echo pytest skipped`` claim a forged ``pytest`` call.

Codex also redacts what looks like a secret in the command it reports (an ``sk-`` key, an AWS
key id...) as ``[REDACTED_SECRET]``: that marker stands for one run of 16 or more characters
other than blanks and quotes (no short word such as ``pytest`` hides behind it), and nothing
else of the command may differ.
"""

from __future__ import annotations

import posixpath
import re

SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
"""The shells a harness wraps a model's command string in (``<shell> -lc <command>``)."""
SHELL_FLAGS = frozenset({"-c", "-lc"})

REDACTED = "[REDACTED_SECRET]"
"""What Codex writes in a reported command in place of a secret."""
_SECRET = r"[^\s'\"]{16,}"
_BLANKS = " \t\n"
_DOUBLE_ESCAPES = '$`"\\'


def split_words(line: str) -> list[str] | None:
    """The words a POSIX shell reads in ``line`` (quotes and backslashes undone, no expansion),
    or None when a quote is left open or the line ends in a lone backslash."""
    words: list[str] = []
    word: list[str] | None = None
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in _BLANKS:
            if word is not None:
                words.append("".join(word))
                word = None
            i += 1
            continue
        word = word if word is not None else []
        if c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                return None
            word.append(line[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(line, i + 1, word)
            if i < 0:
                return None
        elif c == "\\":
            if i + 1 >= n:
                return None
            if line[i + 1] != "\n":  # backslash-newline joins lines
                word.append(line[i + 1])
            i += 2
        else:
            word.append(c)
            i += 1
    if word is not None:
        words.append("".join(word))
    return words


def _double_quoted(line: str, i: int, word: list[str]) -> int:
    """Append the double-quoted text starting at ``i`` to ``word``; the index past its closing
    quote, or -1 when it never closes."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n and line[i + 1] in _DOUBLE_ESCAPES:
            word.append(line[i + 1])
            i += 2
        elif c == "\\" and i + 1 < n and line[i + 1] == "\n":
            i += 2
        else:
            word.append(c)
            i += 1
    return -1


def runs_command(sent: object, reported: str) -> bool:
    """True when ``reported`` (the stream's command line) runs exactly ``sent`` (the model's
    ``cmd``/``command`` argument): the same text, the same argv (a list), or the text as the one
    argument of a shell's ``-c``/``-lc``."""
    words = split_words(reported)
    if isinstance(sent, list):
        parts = [str(part) for part in sent]
        return words is not None and len(words) == len(parts) and all(map(_same_word, words, parts))
    text = str(sent)
    if reported == text:
        return True
    if words is None or len(words) != 3:
        return False
    shell, flag, command = words
    return posixpath.basename(shell) in SHELLS and flag in SHELL_FLAGS and _same_word(command, text)


def _same_word(reported: str, sent: str) -> bool:
    """The same text, but for secrets Codex redacted in ``reported``."""
    if REDACTED not in reported:
        return reported == sent
    pattern = _SECRET.join(re.escape(part) for part in reported.split(REDACTED))
    return re.fullmatch(pattern, sent, flags=re.DOTALL) is not None
