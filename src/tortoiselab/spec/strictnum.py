"""No yes/no where a number goes (issue 50): pydantic's lax mode takes
`true` for 1 and `false` for 0 in an int or float field, so `rtt_ms: true`
ran a path of 1 ms. Every model of an experiment, its path, hosts,
topology, population and maps derives from NumbersModel, which refuses a
bool given to a field that takes numbers and not yes/no (in a list or a
mapping of numbers too), naming the field and the fix, before pydantic
converts anything. A field that takes yes/no (`coalescing: bool`, `int |
bool`) keeps taking it."""

from __future__ import annotations

import json
import types
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationInfo, field_validator

UNIONS = (Union, types.UnionType)


def takes_numbers(ann: Any) -> bool:
    """Whether a field of this annotation takes a number and not a yes/no:
    int or float (constrained, optional, a Literal of numbers), with no bool
    among its choices."""
    origin, args = get_origin(ann), get_args(ann)
    if origin is Annotated:
        return takes_numbers(args[0])
    if origin in UNIONS:
        return bool not in args and any(takes_numbers(a) for a in args)
    if origin is Literal:
        return any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args) and \
            not any(isinstance(a, bool) for a in args)
    return isinstance(ann, type) and issubclass(ann, (int, float)) and not issubclass(ann, bool)


def bool_for_number(value: Any, ann: Any) -> bool:
    """Whether value holds a bool where ann takes a number: the value
    itself, or an item of a list or a value of a mapping of numbers."""
    if isinstance(value, bool):
        return takes_numbers(ann)
    origin, args = get_origin(ann), get_args(ann)
    if origin is Annotated:
        return bool_for_number(value, args[0])
    if origin in UNIONS:
        return any(bool_for_number(value, a) for a in args)
    if isinstance(value, (list, tuple)) and origin in (list, tuple, set, frozenset) and args:
        items = args if origin is tuple and Ellipsis not in args else (args[0],) * len(value)
        return any(bool_for_number(v, a) for v, a in zip(value, items))
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return any(bool_for_number(v, args[1]) for v in value.values())
    return False


@cache
def _number_field(model: type[BaseModel], name: str) -> Any:
    """The annotation of the model's field `name` if it can hold numbers
    (itself, or in a list or mapping), else None."""
    f = model.model_fields.get(name)
    if f is None:
        return None
    ann = f.annotation
    return ann if takes_numbers(ann) or any(takes_numbers(a) for a in _nested(ann)) else None


def _nested(ann: Any) -> list[Any]:
    """Every annotation inside ann (a list's items, a mapping's values, a
    union's choices), at any depth."""
    out, todo = [], list(get_args(ann))
    while todo:
        a = todo.pop()
        out.append(a)
        todo += [x for x in get_args(a) if x is not Ellipsis]
    return out


class NumbersModel(BaseModel):
    """A model whose number fields refuse yes/no (module docstring)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # per field, so that pydantic names it and goes on with the others; cheap for the values that are
        # neither a bool nor a container (most), which are all it sees of a run's configuration
        if isinstance(value, (bool, list, tuple, dict)) and info.field_name:
            ann = _number_field(cls, info.field_name)
            if ann is not None and bool_for_number(value, ann):
                given = json.dumps(value, default=str)
                raise ValueError(f"{given[:60]} is a yes/no, not a number (YAML reads true, false, yes, no, on "
                                 f"and off so); give a number, e.g. {info.field_name}: 1")
        return value
