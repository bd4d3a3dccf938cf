"""Real tools whose return shape comes from every source a shape is read from, each telling
the truth about what it returns (or, for a docstring, contradicting only its annotation):
docstrings in the styles people write, ``typing`` and ``typing_extensions`` TypedDicts
with unusual keys, pydantic models whose serializers, aliases, computed fields and
``extra`` change what is emitted, dataclasses. ``tests/unit/check/test_shape_properties.py`` runs
each
one and reads every path of its real result through the check: none may be refused.

Each tool takes ``variant`` (0-7): its bits choose which optional fields are there, which
nullable ones are null and how long the lists are, so one tool gives several real results.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import uuid
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pydantic
import typing_extensions
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    WithJsonSchema,
    computed_field,
    field_serializer,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema

from durable_plan.tools.registry import ToolRegistry

WHEN = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)


def _on(variant: int, bit: int) -> bool:
    return bool(variant >> bit & 1)


def _items(variant: int) -> int:
    return 2 if _on(variant, 2) else 0


# -- docstrings ---------------------------------------------------------------------------


def doc_google_typed(variant: int) -> dict[str, Any]:
    """Fetch the user (the issue's first case).

    Args:
        variant: Which user.

    Returns:
        dict[str, Any]: the user record.
    """
    return {"id": "u1", "name": "Ada", "tags": ["a"] * _items(variant)}


def doc_google_list_type(variant: int) -> dict[str, Any]:
    """Fetch an order.

    Args:
        variant: Which order.

    Returns:
        Dict[str, List[int]]: the order's lines by sku.
    """
    return {"a1": [1, 2], "b2": [variant]}


def doc_contradicts_annotation(variant: int) -> dict[str, Any]:
    """The docstring says a list; the annotation and the code say an object.

    Args:
        variant: Which one.

    Returns:
        A list of objects shaped {"sku": str}.
    """
    return {"sku": "s1", "count": variant}


def doc_numpy(variant: int) -> dict[str, Any]:
    """Fetch a monster, NumPy style.

    Parameters
    ----------
    variant : int
        Which monster.

    Returns
    -------
    dict
        {"name": str}, with more keys for bosses.
    """
    return {"name": "ogre", "hp": 30, "boss": _on(variant, 0)}


def doc_rest(variant: int) -> dict[str, Any]:
    """Fetch a monster, reST style.

    :param variant: Which monster.
    :returns: {"name": str}
    :rtype: dict
    """
    return {"name": "imp", "hp": 3}


def doc_prose(variant: int) -> dict[str, Any]:
    """Fetch a monster.

    Args:
        variant: Which monster.

    Returns:
        The monster's stat block, e.g. {"name": "imp"} for an imp.
    """
    return {"name": "imp", "stats": {"hp": 3}}


def doc_example_values(variant: int) -> dict[str, Any]:
    """Fetch an employee (the issue's fifth case: example values, not types).

    Args:
        variant: Which employee.

    Returns:
        An object like {"name": "Bob", "manager": null}
    """
    manager = {"name": "Al", "id": 7} if _on(variant, 1) else None
    return {"name": "Bob", "manager": manager, "age": 40}


def doc_example_json(variant: int) -> dict[str, Any]:
    """Fetch a page.

    Args:
        variant: Which page.

    Returns:
        {"count": 2, "items": [{"id": 1}], "next": true}
    """
    return {"count": 2, "items": [{"id": 1, "title": "x"}], "next": "cursor-2"}


def doc_two_shapes(variant: int) -> dict[str, Any]:
    """Fetch a pet.

    Args:
        variant: Which pet.

    Returns:
        {"purrs": bool} for cats, {"barks": bool} for dogs.
    """
    return {"barks": True} if _on(variant, 0) else {"purrs": True}


def doc_seed_convention(variant: int) -> dict[str, Any]:
    """Fetch a monster, in the seed's convention (and true to it).

    Args:
        variant: Which monster.

    Returns:
        An object shaped {"name": str, "hp": int, "lair": str | None, "loot":
        [{"item": str, "value": float}], "desk": "treasury" | "engineering"}.
    """
    loot = [{"item": "gem", "value": 2.5}, {"item": "coin", "value": 1}][: _items(variant)]
    return {
        "name": "ogre",
        "hp": 30,
        "lair": None if _on(variant, 1) else "cave",
        "loot": loot,
        "desk": "treasury" if _on(variant, 0) else "engineering",
    }


def doc_list_of_objects(variant: int) -> list[dict[str, Any]]:
    """Fetch monsters.

    Args:
        variant: Which ones.

    Returns:
        A list of objects shaped {"name": str, "hp": int}.
    """
    return [{"name": "imp", "hp": 3}] * (1 + _items(variant))


def doc_keys_only(variant: int) -> dict[str, Any]:
    """Roll.

    Args:
        variant: The roll.

    Returns:
        {"roll", "hits"}
    """
    return {"roll": variant, "hits": _on(variant, 0)}


# -- TypedDicts ---------------------------------------------------------------------------


class Stats(TypedDict):
    hp: int
    armour: int


class MongoDoc(TypedDict):
    """A plain ``typing.TypedDict`` with keys Python names cannot be (the issue's second
    case: ``_id``)."""

    _id: str
    __v: int
    name: str
    stats: Stats
    nickname: NotRequired[str]
    tags: list[str]
    seen: datetime.datetime


Odd = TypedDict(
    "Odd",
    {"$ref": str, "class": int, "a-b": int, "a b": str, "_": bool, "__dunder__": int},
)


class Partial(TypedDict, total=False):
    title: str
    score: float | None


class ExtDoc(typing_extensions.TypedDict):
    _id: str
    status: Literal["open", "closed"]
    nested: MongoDoc


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Rich(TypedDict):
    when: datetime.datetime
    day: datetime.date
    gap: datetime.timedelta
    color: Color
    ids: set[int]
    pair: tuple[int, str]
    blob: bytes
    amount: decimal.Decimal
    key: uuid.UUID
    either: int | str | None


class _MongoDocPlus(MongoDoc):
    secret: str


def typeddict_mongo(variant: int) -> MongoDoc:
    """A MongoDB-style document."""
    doc = _MongoDocPlus(
        _id="64f0",
        name="n",
        stats={"hp": 1, "armour": 2},
        tags=["x"] * _items(variant),
        seen=WHEN,
        secret="dropped: the annotation does not declare it",
    )
    doc["_MongoDoc__v"] = 0  # type: ignore[typeddict-unknown-key]
    if _on(variant, 0):
        doc["nickname"] = "nick"
    return doc


def typeddict_odd_keys(variant: int) -> Odd:
    """Keys with a dollar, a keyword, a dash, a space, underscores."""
    return {"$ref": "#/x", "class": 3, "a-b": 1, "a b": "c", "_": True, "__dunder__": 2}


def typeddict_partial(variant: int) -> list[Partial]:
    """A list of TypedDicts whose keys are all optional."""
    one: Partial = {}
    if _on(variant, 0):
        one["title"] = "t"
    if _on(variant, 1):
        one["score"] = None if _on(variant, 0) else 0.5
    return [one] * (1 + _items(variant))


def typeddict_extensions(variant: int) -> ExtDoc:
    """A ``typing_extensions.TypedDict`` holding a plain one."""
    return {
        "_id": "e1",
        "status": "open" if _on(variant, 0) else "closed",
        "nested": typeddict_mongo(variant),
    }


def typeddict_rich(variant: int) -> Rich:
    """Values JSON has no type for: dates, enums, sets, tuples, bytes, decimals, UUIDs."""
    return {
        "when": WHEN,
        "day": WHEN.date(),
        "gap": datetime.timedelta(seconds=90),
        "color": Color.BLUE if _on(variant, 0) else Color.RED,
        "ids": {1, 2},
        "pair": (1, "a"),
        "blob": b"raw",
        "amount": decimal.Decimal("1.50"),
        "key": uuid.UUID(int=variant),
        "either": [1, "one", None, 2][variant % 4],
    }


def typeddict_union(variant: int) -> Stats | Odd | None:
    """One of two TypedDicts, or None."""
    if variant % 3 == 0:
        return None
    if variant % 3 == 1:
        return {"hp": 1, "armour": 2}
    return typeddict_odd_keys(variant)


# -- pydantic -----------------------------------------------------------------------------


class Event(BaseModel):
    """The issue's third case: a wrap serializer without a return annotation."""

    name: str

    @model_serializer(mode="wrap")
    def _with_kind(self, handler):  # type: ignore[no-untyped-def]
        out = handler(self)
        out["kind"] = "event"
        return out


class Plain(BaseModel):
    secret: str

    @model_serializer
    def _public(self):  # type: ignore[no-untyped-def]
        return {"public": self.secret[:1], "parts": [1, 2]}


class Annotated_(BaseModel):
    a: int

    @model_serializer(mode="wrap")
    def _more(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), "more": True}


class Stamp(BaseModel):
    """The issue's fourth case: a field serializer without a return annotation."""

    at: datetime.datetime
    note: str

    @field_serializer("at")
    def _epoch(self, value: datetime.datetime):  # type: ignore[no-untyped-def]
        return int(value.timestamp())


class AnySer(BaseModel):
    at: datetime.datetime

    @field_serializer("at", when_used="unless-none")
    def _parts(self, value: datetime.datetime) -> Any:
        return [value.year, value.month]


class Lambdas(BaseModel):
    f: Annotated[int, PlainSerializer(lambda v: str(v))]
    g: Annotated[int, PlainSerializer(lambda v: f"{v}!", return_type=str)]


class Computed(BaseModel):
    first: str
    last: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


class ByAlias(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True, populate_by_name=True)
    user_id: int = Field(alias="userId")
    display: str = Field(serialization_alias="displayName")


class SerAlias(BaseModel):
    user_id: int = Field(serialization_alias="userId")
    other: int = Field(validation_alias=AliasChoices("other", "o"))


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class Hidden(BaseModel):
    shown: int
    gone: int = Field(exclude=True)
    maybe: int | None = Field(default=None, exclude_if=lambda v: v is None)


class Lies(BaseModel):
    """What the owner wrote into the schema alone; the serializer ignores it."""

    model_config = ConfigDict(
        json_schema_extra={"properties": {"made_up": {"type": "string"}}, "required": []}
    )
    x: Annotated[int, WithJsonSchema({"type": "string"})]
    y: int = Field(json_schema_extra={"type": "array"})
    z: SkipJsonSchema[int] = 3
    w: int | SkipJsonSchema[None] = None


class Validation(BaseModel):
    model_config = ConfigDict(json_schema_mode_override="validation")
    user_id: int = Field(validation_alias="uid")


class Settings(BaseModel):
    model_config = ConfigDict(
        use_enum_values=True, ser_json_timedelta="float", ser_json_bytes="base64"
    )
    color: Color
    gap: datetime.timedelta
    blob: bytes
    ids: frozenset[str]
    pair: tuple[int, ...]


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    purrs: bool


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    barks: bool


class Pet(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    owner: Event | None = None


class Animal(BaseModel):
    name: str


class Puppy(Animal):
    breed: str


Scores = RootModel[dict[str, list[int]]]


def pydantic_event(variant: int) -> Event:
    """A model that adds a field when it serializes."""
    return Event(name="boot")


def pydantic_plain(variant: int) -> Plain:
    """A model serialized as something else entirely."""
    return Plain(secret="hidden")


def pydantic_annotated_wrap(variant: int) -> Annotated_:
    """A wrap serializer annotated ``-> dict[str, Any]``: an object of any fields."""
    return Annotated_(a=variant)


def pydantic_stamp(variant: int) -> Stamp:
    """A datetime field serialized as epoch seconds."""
    return Stamp(at=WHEN, note="n")


def pydantic_any_serializer(variant: int) -> list[AnySer]:
    """A field serializer annotated ``-> Any``."""
    return [AnySer(at=WHEN)] * (1 + _items(variant))


def pydantic_lambdas(variant: int) -> Lambdas:
    """``PlainSerializer`` with and without a return type."""
    return Lambdas(f=variant, g=2)


def pydantic_computed(variant: int) -> Computed:
    """A computed field."""
    return Computed(first="Ada", last="Lovelace")


def pydantic_by_alias(variant: int) -> ByAlias:
    """Aliases, serialized by alias."""
    return ByAlias(user_id=variant, display="d")


def pydantic_ser_alias(variant: int) -> SerAlias:
    """A serialization alias (not used unless asked) and a validation alias."""
    return SerAlias(user_id=variant, other=1)


def pydantic_extra(variant: int) -> Extra:
    """``extra="allow"``: whatever it was given, it emits."""
    return Extra(name="x", **({"bonus": 1, "nested": {"a": [1]}} if _on(variant, 0) else {}))


def pydantic_hidden(variant: int) -> Hidden:
    """An excluded field, and one left out when None."""
    return Hidden(shown=1, gone=2, maybe=variant if _on(variant, 0) else None)


def pydantic_lies(variant: int) -> Lies:
    """A model whose JSON Schema says otherwise than its serializer."""
    return Lies(x=1, y=2, w=None if _on(variant, 1) else 4)


def pydantic_validation_schema(variant: int) -> Validation:
    """``json_schema_mode_override="validation"``: its schema is its input's."""
    return Validation(uid=variant)


def pydantic_settings(variant: int) -> Settings:
    """Enum values, timedeltas as seconds, bytes as base64, sets and tuples."""
    return Settings(
        color=Color.RED, gap=datetime.timedelta(1), blob=b"\x00\xff", ids={"a"}, pair=(1, 2, 3)
    )


def pydantic_union(variant: int) -> Pet:
    """A discriminated union, and a nested model that adds a field."""
    pet: Cat | Dog = Dog(barks=True) if _on(variant, 0) else Cat(purrs=False)
    return Pet(pet=pet, owner=Event(name="o") if _on(variant, 1) else None)


def pydantic_subclass(variant: int) -> Animal:
    """A subclass instance: the annotation's fields are what the plan gets."""
    return Puppy(name="rex", breed="lab")


def pydantic_root(variant: int) -> Scores:
    """A root model."""
    return Scores({"a": [1, 2], "b": []})


# -- dataclasses --------------------------------------------------------------------------


@dataclasses.dataclass
class Receipt:
    _id: str
    amount: decimal.Decimal
    when: datetime.datetime
    lines: list[Stats] = dataclasses.field(default_factory=list)
    note: str | None = None


@pydantic.dataclasses.dataclass
class PydanticReceipt:
    total: int
    color: Color

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.total * 2


def dataclass_receipt(variant: int) -> Receipt:
    """A dataclass with an underscore field and a list of TypedDicts."""
    lines: list[Stats] = [{"hp": 1, "armour": 2}] * _items(variant)
    return Receipt("r1", decimal.Decimal("9.99"), WHEN, lines, "n" if _on(variant, 0) else None)


def dataclass_pydantic(variant: int) -> PydanticReceipt:
    """A pydantic dataclass with a computed field."""
    return PydanticReceipt(total=variant, color=Color.BLUE)


SOURCES = [
    doc_google_typed,
    doc_google_list_type,
    doc_contradicts_annotation,
    doc_numpy,
    doc_rest,
    doc_prose,
    doc_example_values,
    doc_example_json,
    doc_two_shapes,
    doc_seed_convention,
    doc_list_of_objects,
    doc_keys_only,
    typeddict_mongo,
    typeddict_odd_keys,
    typeddict_partial,
    typeddict_extensions,
    typeddict_rich,
    typeddict_union,
    pydantic_event,
    pydantic_plain,
    pydantic_annotated_wrap,
    pydantic_stamp,
    pydantic_any_serializer,
    pydantic_lambdas,
    pydantic_computed,
    pydantic_by_alias,
    pydantic_ser_alias,
    pydantic_extra,
    pydantic_hidden,
    pydantic_lies,
    pydantic_validation_schema,
    pydantic_settings,
    pydantic_union,
    pydantic_subclass,
    pydantic_root,
    dataclass_receipt,
    dataclass_pydantic,
]
NAMES = [fn.__name__ for fn in SOURCES]
FIXED = frozenset({"doc_seed_convention", "doc_list_of_objects", "doc_keys_only"})
"""Sources that must give a shape (the control: the property is not passing for want of
shapes); the others may give one, or none."""


def registry() -> ToolRegistry:
    """Every source, registered as a function tool."""
    return ToolRegistry(SOURCES)


@functools.cache
def shared() -> ToolRegistry:
    """One registry for the property tests' many examples (built once: it is not changed)."""
    return registry()
