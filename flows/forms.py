"""The deployments' parameter forms as a person meets them in the Prefect UI.

Prefect derives each form from the flow's signature (pydantic models → JSON Schema). What a
reader needs on top is fixed here, on the schema, when the deployments are registered:
the question first; optional fields without Prefect's "string / None" switch; the generation as
a choice built from the current state (refreshed on every registration); the operator's name and
token required on operator forms; budgets tucked into one optional "advanced" section with the
server's values as defaults; fields meant for in-process callers removed.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from schemas.settings import MabillonSettings

# Fields in-process callers may set but a form never shows (a typed principal is never trusted
# in a deployment run; the flat budget fields are the older spelling of `budgets`).
IN_PROCESS_ONLY = ("principal", "max_sub_questions", "step_budget", "max_calls", "max_tokens")


@dataclass
class GenerationChoices:
    """Generations a form offers, from the routing record and the manifests at registration."""

    serving: str | None
    servable: list[str] = field(default_factory=list)  # newest first
    previous: str | None = None  # what rollback returns to by default
    summary: str = ""  # "g0003 serves since 2026-12-01 21:40 (promote by marie)"

    @classmethod
    def read(cls, settings: MabillonSettings) -> "GenerationChoices":
        from tasks.ops.generations import generation_statuses
        from tasks.ops.switching import previously_serving
        from tasks.store.layout import StoreLayout
        from tasks.store.routing import read_routing

        layout = StoreLayout.from_settings(settings)
        try:
            routing = read_routing(layout)
            statuses = generation_statuses(layout)
        except Exception:  # an unreadable state: forms fall back to free text
            return cls(serving=None)
        servable = [s.generation for s in reversed(statuses) if s.data_kept]
        summary = "nothing serves yet"
        if routing.serving:
            last = next((e for e in reversed(routing.history) if e.to_generation == routing.serving), None)
            summary = f"{routing.serving} serves" + (
                f" since {last.at:%Y-%m-%d %H:%M} UTC ({last.action} by {last.actor})" if last else "")
        return cls(serving=routing.serving, servable=servable, previous=previously_serving(routing),
                   summary=summary)


def _definition(schema, name: str) -> dict | None:
    return schema.definitions.get(name)


def plain_optional(prop: dict) -> dict:
    """`anyOf: [X, null]` as plain X: one input in the form instead of a "string / None" switch
    (Prefect's form draws no input at all for `type: [X, "null"]`). A field left empty is left
    out of the run's parameters, which keeps the model's default (None); a caller of the API
    omits it rather than sending null."""
    options = prop.get("anyOf")
    if not options or len(options) != 2 or {"type": "null"} not in options:
        return prop
    (kept,) = [o for o in options if o != {"type": "null"}]
    if "type" not in kept or "$ref" in kept:
        return prop
    out = {k: v for k, v in prop.items() if k != "anyOf"}
    if out.get("default", "absent") is None:
        out.pop("default")
    return {**kept, **out}


# Optional sections that stay optional: the form shows them folded until someone opens them.
FOLDED = ("budgets",)


def tidy_model(schema, name: str, first: str | None = None, hide: tuple[str, ...] = (),
               required: tuple[str, ...] = ()) -> None:
    d = _definition(schema, name)
    if d is None:
        return
    props = {k: v if k in FOLDED else plain_optional(v)
             for k, v in d.get("properties", {}).items() if k not in hide}
    if first in props:
        props = {first: props.pop(first), **props}
    d["properties"] = props
    d["required"] = sorted(set(d.get("required", [])) - set(hide) | set(required),
                           key=list(props).index)


def generation_choice(prop: dict, choices: list[str], description: str) -> dict:
    if not choices:
        return prop
    return {**{k: v for k, v in prop.items() if k not in ("type", "anyOf")},
            "type": "string", "enum": choices, "description": description}


def top_level(schema, title: str, description: str | None = None, required: bool = True) -> None:
    """The `params` parameter: one titled section (required: no None switch for it either)."""
    prop = schema.properties["params"]
    refs = [o for o in prop.get("anyOf", []) if "$ref" in o]
    if refs:  # `params: Model | None = None`: the model itself, always shown
        prop = {**{k: v for k, v in prop.items() if k not in ("anyOf", "default")}, **refs[0]}
    prop["title"] = title
    if description:
        prop["description"] = description
    schema.properties["params"] = prop
    if required and "params" not in schema.required:
        schema.required.append("params")


def ask_form(schema, settings: MabillonSettings, gens: GenerationChoices, model: str) -> None:
    tidy_model(schema, model, first="question" if model == "AskParams" else "questions_path",
               hide=IN_PROCESS_ONLY)
    d = _definition(schema, model)
    if d is None:
        return
    d["properties"]["generation"] = generation_choice(
        d["properties"]["generation"], ["serving", *gens.servable],
        f"which published index to search; 'serving' follows the operators' choice "
        f"({gens.summary})")
    from tasks.llm.registry import PROVIDERS

    d["properties"]["provider"] = {**d["properties"]["provider"], "enum": ["auto", *PROVIDERS]}
    tidy_model(schema, "AskBudgets")
    budgets = _definition(schema, "AskBudgets")
    if budgets is not None:  # the server's values as defaults: what "empty" means, shown
        defaults = {"max_sub_questions": settings.query.max_sub_questions,
                    "step_budget": settings.query.step_budget,
                    "max_calls": settings.llm.max_calls_per_question,
                    "max_tokens": settings.llm.max_tokens_per_question}
        for name, value in defaults.items():
            if name in budgets["properties"]:
                budgets["properties"][name]["default"] = value
    top_level(schema, "Your question" if model == "AskParams" else "Questions",
              "Type the question; the access token is optional (public material without it).")


OPERATOR = ("operator", "operator_token")


def operator_form(schema, model: str, gens: GenerationChoices, field_name: str | None,
                  title: str, extra_required: tuple[str, ...] = ()) -> None:
    tidy_model(schema, model, required=(*OPERATOR, *extra_required))
    d = _definition(schema, model)
    if d is None:
        return
    props = d["properties"]
    if field_name == "generation":
        props["generation"] = generation_choice(
            props["generation"], [g for g in gens.servable if g != gens.serving],
            f"the generation to serve; now {gens.summary}")
    elif field_name == "to":
        others = [g for g in gens.servable if g != gens.serving]
        props["to"] = generation_choice(
            props["to"], others, f"now {gens.summary}; leave empty to return to "
            f"{gens.previous or 'the previously serving generation'}")
    top_level(schema, title, f"Now {gens.summary}.")


def apply_forms(schemas: dict, settings: MabillonSettings) -> None:
    """Fix every deployment's form in place; `schemas` maps flow names to ParameterSchema."""
    gens = GenerationChoices.read(settings)
    for name, schema in schemas.items():
        if name == "ask":
            ask_form(schema, settings, gens, "AskParams")
        elif name == "ask-batch":
            ask_form(schema, settings, gens, "AskBatchParams")
        elif name == "promote":
            operator_form(schema, "PromoteParams", gens, "generation", "Promote a generation",
                          ("reason",))
        elif name == "rollback":
            operator_form(schema, "RollbackParams", gens, "to", "Roll back", ("reason",))
        elif name == "canary":
            operator_form(schema, "CanaryParams", gens, "generation", "Canary: a candidate for some groups")
        elif name == "release":
            tidy_model(schema, "ReleaseOptions")
        elif name == "delete":
            operator_form(schema, "DeleteParams", gens, None, "Delete documents", ("reason",))
            props = _definition(schema, "DeleteParams")["properties"]
            props["reason"]["minLength"] = 3
        elif name == "gc":
            operator_form(schema, "GcParams", gens, None, "Garbage collection")
        elif name == "scheduled-ingest":
            tidy_model(schema, "ScheduledIngestParams")
            tidy_model(schema, "ReleaseOptions")
            top_level(schema, "What to ingest")
        elif name == "harvest":
            tidy_model(schema, "HarvestParams")
            tidy_model(schema, "HarvestRequest")
            tidy_model(schema, "ReleaseOptions")
            top_level(schema, "What to harvest")
        elif name == "evaluate":
            tidy_model(schema, "EvalOptions", hide=("principal",))


def deployment_description(name: str, gens: GenerationChoices) -> str:
    return DESCRIPTIONS.get(name, "").format(now=gens.summary)


DESCRIPTIONS = {
    "ask": "For researchers: ask a question and get the source documents that answer it, each "
           "with its passage and a link. Your access token, if you have one, opens your "
           "collections. Now {now}.",
    "ask-batch": "For researchers and evaluators: answer every question of a JSONL file; the "
                 "evidence packages land in one file. Now {now}.",
    "scheduled-ingest": "For archivists: ingest the drop folder or URI list and publish a new "
                        "generation (on its schedule, or now). Unreadable entries are skipped "
                        "and named; bad files are quarantined with their reason.",
    "harvest": "For archivists: fetch newspaper issues from Gallica (an issue ARK, a title ARK and "
               "dates, or an SRU search) at one request a second, resuming where the last run "
               "stopped, and publish them. An issue Gallica cannot serve is quarantined with its reason.",
    "promote": "For operators: serve another published generation (index and query encoder "
               "switch together). Needs an operator token and your name. Now {now}.",
    "rollback": "For operators: serve the previously serving generation again, or the one you "
                "choose. Needs an operator token and your name. Now {now}.",
    "canary": "For operators: serve a candidate generation to the principals of named groups only, "
              "everyone else staying on the serving one (promote, rollback or stop end it). Needs "
              "an operator token and your name. Now {now}.",
    "release": "For archivists and operators: ingest the paths given and publish a generation; with "
               "the gate on, it is shadowed and waits here, paused, for a person's decision "
               "(approve, reject or canary). Now {now}.",
    "delete": "For operators: delete documents from every answer at once and from every copy on "
              "disk (rights requests, errors). Needs a reason, an operator token and your name.",
    "gc": "For operators: retire generations beyond the retention policy and remove them, and "
          "deleted documents past their window, from disk. Needs an operator token.",
    "evaluate": "For evaluators: recall@k and MRR of the retrieval systems on a question set, "
                "with a report. Now {now}.",
}


def copy_schema(schema):
    return copy.deepcopy(schema)
