"""option(): a dataclass field that is also a command-line flag, declared once.

``llmkit serve`` turns every such field of its option classes into a flag (its type, and
any choices of a ``Literal``, read from the field's annotation) and the parsed flags back
into the option objects, so that a new setting is one field in one class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line, beside its ``help`` text.

    ``name``: the flag (default: ``--`` and the field's name, dashed). ``group``: the key
    of its ``--help`` section (the command names the sections; None: the command's own).
    ``metavar``, ``nargs``, ``action``: argparse's (a bool field is a ``store_true``
    flag). ``parse``: turns the flag's value (a list, for ``nargs`` and ``"append"``) into
    the field's, raising ValueError for a bad one; None left by it keeps the default.
    """

    name: str | None = None
    group: str | None = None
    metavar: str | None = None
    nargs: str | None = None
    action: str | None = None
    parse: Callable[[Any], Any] | None = None


def option(default: Any, *, help: str, **flag: Any) -> Any:
    """A field with ``default``, documented by ``help`` and set by the :class:`Flag`
    that ``flag`` describes."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": Flag(**flag)})
