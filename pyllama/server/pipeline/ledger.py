"""What /slots says of the task a slot runs, beyond what the engine's slot snapshot holds:
the request and sampling parameters each task was made from (``make_tasks`` notes them
against the task's ``TaskParams``; ``submit`` files them under the engine's task id). A
bounded record of the latest tasks: /slots reads it for the slots that are busy."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyllama import _core
from pyllama.server.state import ServerState

__all__ = ["Record", "file", "lookup", "note"]

_KEEP = 256  # tasks remembered (far more than a server runs at once)


@dataclass
class Record:
    req: Any  # the validated request (a pipeline.schemas.Sampling)
    sampling: _core.SamplingParams
    n_predict: int  # the task's limit (-1: none)


class _Ledger:
    def __init__(self) -> None:
        self.pending: dict[int, Record] = {}  # id(TaskParams) -> its record, until submitted
        self.tasks: OrderedDict[int, Record] = OrderedDict()  # engine task id -> record


_LEDGERS: weakref.WeakKeyDictionary[ServerState, _Ledger] = weakref.WeakKeyDictionary()


def _ledger(state: ServerState) -> _Ledger:
    ledger = _LEDGERS.get(state)
    if ledger is None:
        ledger = _LEDGERS[state] = _Ledger()
    return ledger


def note(state: ServerState, task: _core.TaskParams, record: Record) -> None:
    """``make_tasks``: the record of a task about to be submitted."""
    _ledger(state).pending[id(task)] = record


def file(state: ServerState, tasks: list[_core.TaskParams], task_ids: list[int]) -> None:
    """``submit``: the noted records under the engine's task ids (notes of tasks that were
    refused are dropped)."""
    ledger = _ledger(state)
    for task, task_id in zip(tasks, task_ids):
        record = ledger.pending.pop(id(task), None)
        ledger.tasks.pop(task_id, None)  # an id a restarted engine reuses
        if record is not None:
            ledger.tasks[task_id] = record
            while len(ledger.tasks) > _KEEP:
                ledger.tasks.popitem(last=False)
    for task in tasks:
        ledger.pending.pop(id(task), None)


def lookup(state: ServerState, task_id: int) -> Record | None:
    return _ledger(state).tasks.get(task_id)
