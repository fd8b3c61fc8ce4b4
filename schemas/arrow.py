"""Arrow schemas derived from pydantic row models (as lancedb's `LanceModel.to_arrow_schema`).

A stored table is defined once, as a pydantic model; its Arrow schema is read off the fields:
`str` → string, `int` → int64, `float` → float64, `bool` → bool, `datetime` → timestamp (µs,
UTC), `list[X]` and homogeneous tuples → list of X, a nested model → struct. A narrower
physical type is asked for in the annotation (`Int32`, `Float32`). A column is nullable when
its annotation admits None, unless the caller asks for every column nullable.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import pyarrow as pa
from pydantic import BaseModel


@dataclass(frozen=True)
class ArrowType:
    """Annotation metadata: the physical Arrow type of a field (`Annotated[int, ArrowType(...)]`)."""

    type: pa.DataType


Int32 = Annotated[int, ArrowType(pa.int32())]
Float32 = Annotated[float, ArrowType(pa.float32())]

_SCALARS: dict[type, pa.DataType] = {
    str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def arrow_type(annotation: Any, metadata: tuple[Any, ...] = ()) -> tuple[pa.DataType, bool]:
    """(the Arrow type of an annotation, whether it admits None)."""
    for m in metadata:
        if isinstance(m, ArrowType):
            return m.type, False
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return arrow_type(args[0], (*metadata, *args[1:]))
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if len(present) != 1:
            raise TypeError(f"no Arrow type for a union of {present}")
        return arrow_type(present[0], metadata)[0], len(present) < len(args)
    if origin in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        if not items or any(a != items[0] for a in items):
            raise TypeError(f"no Arrow type for {annotation!r}: items of one type only")
        return pa.list_(arrow_type(items[0])[0]), False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(list(arrow_schema(annotation))), False
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    raise TypeError(f"no Arrow type for {annotation!r}")


def arrow_schema(model: type[BaseModel], *, all_nullable: bool = False) -> pa.Schema:
    """The Arrow schema of a row model, its fields in order.

    `all_nullable` declares every column nullable whatever the model requires: the row model
    then says what a row must hold and the stored files keep pyarrow's default flags."""
    fields = []
    for name, info in model.model_fields.items():
        dtype, nullable = arrow_type(info.annotation, tuple(info.metadata))
        fields.append(pa.field(name, dtype, nullable=nullable or all_nullable))
    return pa.schema(fields)
