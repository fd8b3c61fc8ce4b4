"""Scripted provider steps for control-flow tests of the TRACE loop (replay provider)."""
from __future__ import annotations

import json

from schemas.query import LoopParams, Memory
from tasks.llm.base import Ledger
from tasks.llm.replay import ReplayProvider
from tasks.llm.rules import RulesProvider
from tasks.query.loop import answer_question
from tasks.query.record import read_record
from tasks.store.layout import StoreLayout

MEM = {k: "" for k in Memory.model_fields}


def plan(*subs):
    return {"sub_questions": [{"text": t, "target_corpus": c, "entities": e}
                              for t, c, e in subs]}


def search(action, **args):
    return {"thought": f"try {action}", "action": action, "args": args, "memory_update": MEM}


FINISH = search("finish")


def review(decide):
    """A review answering every hit under review with decide(hit) ∈ accept/reject/hold."""
    def answer(request):
        return {"thought": "review", "action": "review", "memory_update": MEM, "args": {
            "verdicts": [{"chunk_id": h.chunk_id, "verdict": decide(h), "rationale": "scripted"}
                         for h in request.context.hits]}}
    return answer


def everything(verdict):
    return review(lambda h: verdict)


def run(retriever, tmp_path, script, params=None, ledger=None, fallback=True):
    provider = ReplayProvider(script, fallback=RulesProvider() if fallback else None)
    layout = StoreLayout(tmp_path / "wh", tmp_path / "mf")
    package = answer_question(retriever, "Floquet président", provider,
                              params or LoopParams(replan=False), layout=layout,
                              ledger=ledger)
    record = read_record(package.record)
    return package, record, provider


def steps(record, sub=0, kind=None):
    return [s for s in record.steps if s.sub_question == sub and (kind is None or s.kind == kind)]


def dumps(x):
    return json.dumps(x)
