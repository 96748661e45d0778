"""The flag table being built: argparse's parser, the LLAMA_ARG_* variable of each flag,
and the --help section each flag is listed under (llama-server's sections, in its order)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["SECTIONS", "FlagTable", "env_bool"]

# llama-server's --help sections, then pyllama's own flags
SECTIONS = {
    "common": "common params",
    "sampling": "sampling params",
    "speculative": "speculative params",
    "server": "example-specific params",
    "pyllama": "pyllama params",
}

_BOOL_TRUE = {"1", "true", "on", "yes", "enabled"}
_BOOL_FALSE = {"0", "false", "off", "no", "disabled"}


def env_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in _BOOL_TRUE:
        return True
    if v in _BOOL_FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got '{value}'")


class FlagTable:
    """``flag`` and ``switch`` add to the section last named by ``section``."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.envs: dict[str, tuple[str, Callable[[str], Any]]] = {}  # dest -> (variable, converter)
        self._groups = {key: parser.add_argument_group(title) for key, title in SECTIONS.items()}
        self._group = self._groups["common"]

    def section(self, key: str) -> FlagTable:
        self._group = self._groups[key]
        return self

    def flag(
        self,
        *names: str,
        env: str | None = None,
        conv: Callable[[str], Any] | None = None,
        **kw: Any,
    ) -> argparse.Action:
        action = self._group.add_argument(*names, **kw)
        if env:
            self.envs[action.dest] = (env, conv or kw.get("type") or str)
        return action

    def switch(
        self, on: Sequence[str], off: Sequence[str], dest: str, env: str | None, help: str
    ) -> None:
        """``on`` sets ``dest`` True, ``off`` False; None when neither is given."""
        self.flag(
            *on, dest=dest, action="store_true", default=None, env=env, conv=env_bool, help=help
        )
        self._group.add_argument(*off, dest=dest, action="store_false", help=argparse.SUPPRESS)

    def removed(self, *names: str, env: str | None = None, use: str) -> None:
        """An option llama-server has removed: an error saying what replaced it."""
        message = f"the argument has been removed. use {use}"

        def refuse(_: str) -> Any:
            raise argparse.ArgumentTypeError(message)

        self.flag(*names, env=env, conv=refuse, action=_Removed, use=use, help=argparse.SUPPRESS)


class _Removed(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, use: str = "", **kw: Any) -> None:
        kw.pop("type", None)
        super().__init__(option_strings, dest, **kw)
        self.use = use

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        parser.error(f"{self.option_strings[-1]}: the argument has been removed. use {self.use}")
