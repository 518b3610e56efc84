"""Checked parameter declarations shared by the G2G nodes.

Every numeric parameter gets a declared range in its descriptor (ROS ``FloatingPointRange`` /
``IntegerRange``, shown by ``ros2 param describe`` and enforced by rclpy on every set); a double
without an explicit range still gets the finite range, so NaN and inf are refused everywhere.
An integer given for a double parameter (``tf_rate_hz:=20``) is taken as that double.

Types: rclpy's own type check answers ``Wrong parameter type, expected '2' got '3'`` (type
codes), so the parameters are declared with ``dynamic_typing`` and :func:`type_problem` (an
on-set check of the node) refuses another type with a reason that names both types.

A bad value from the command line or a parameter file (out of range, wrong type) would make
rclpy raise while the node is being constructed, killing it; :func:`declare_checked` declares
the default instead and returns the reason, which the node reports (its configure then fails
with it, see :class:`g2g_ros.managed_node.ManagedNode`) until a valid value is set.

Rates and periods are bounded by what they cost: no value in range makes an idle node burn
CPU (each such parameter's description says why its bound is where it is). A period that may
be 0 for "off" has a floor above 0 (``zero_or_at_least``), which a single ROS range cannot
express: :func:`floor_problem` checks it at start-up and on every set, with the reason.

Each node's parameters are one dataclass whose fields are made by :func:`param` (default,
description, read at configure or not, read-only, range, floor); :func:`declare_fields`
declares them all on a node and :func:`read_fields` reads the values back into an instance.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterValueException
from rclpy.parameter import Parameter

FINITE = (-sys.float_info.max, sys.float_info.max)

_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a double", str: "a string",
               bytes: "a byte array"}


def type_name(value: Any) -> str:
    """``an integer``, ``a double``, ``a string array``, ... for messages (never type codes)."""
    if isinstance(value, (list, tuple)):
        if not len(value):
            return "an empty array"
        inner = type_name(value[0]).split(" ", 1)[1]
        return f"{'an' if inner[0] in 'aeiou' else 'a'} {inner} array"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def descriptor(default: Any, description: str, read_only: bool = False,
               constraints: str = "", value_range: Optional[Tuple[Any, Any]] = None
               ) -> ParameterDescriptor:
    """A descriptor with a range for numbers: ``value_range`` (inclusive), else for doubles the
    finite range."""
    # dynamic_typing: the type is checked by type_problem, whose reasons name the types.
    desc = ParameterDescriptor(description=description, read_only=read_only,
                               additional_constraints=constraints, dynamic_typing=True)
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        if value_range is not None:
            raise ValueError(f"a range needs a numeric default, got {default!r}")
        return desc
    if isinstance(default, float):
        lo, hi = value_range if value_range is not None else FINITE
        desc.floating_point_range = [FloatingPointRange(from_value=float(lo),
                                                        to_value=float(hi), step=0.0)]
    elif value_range is not None:
        desc.integer_range = [IntegerRange(from_value=int(value_range[0]),
                                           to_value=int(value_range[1]), step=0)]
    if value_range is not None and not value_range[0] <= default <= value_range[1]:
        raise ValueError(f"default {default!r} outside its range {value_range}")
    return desc


def range_text(desc: ParameterDescriptor) -> str:
    for r in list(desc.floating_point_range) + list(desc.integer_range):
        if (r.from_value, r.to_value) != FINITE:
            return f"[{r.from_value:g}, {r.to_value:g}]"
    return "finite" if desc.floating_point_range else ""


def type_problem(name: str, value: Any, default: Any) -> Optional[str]:
    """Why ``value`` cannot be parameter ``name`` (declared with ``default``), or None."""
    if Parameter.Type.from_parameter_value(value) == Parameter.Type.from_parameter_value(default):
        return None
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)) and not value:
        return None  # an empty array has no element type; the node checks what it needs
    return f"parameter {name} must be {type_name(default)}, got {value!r} ({type_name(value)})"


def floor_text(floor: float) -> str:
    """The ``additional_constraints`` of a parameter with a floor (``zero_or_at_least``)."""
    return f"0 (off) or at least {floor:g}"


def floor_problem(name: str, value: Any, floor: Optional[float]) -> Optional[str]:
    """Why ``value`` is below the floor of parameter ``name`` (0 = off is allowed), or None."""
    if floor is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if 0 < value < floor:
        return (f"parameter {name} must be {floor_text(floor)}, got {value!r}: a shorter "
                "period wakes the node more often than any input needs, costing CPU while idle")
    return None


def declare_checked(node, name: str, default: Any, desc: ParameterDescriptor,
                    floor: Optional[float] = None) -> Tuple[Any, Optional[str]]:
    """Declare ``name``; returns ``(value, problem)``. A bad override (out of range, NaN/inf,
    wrong type, below ``floor``) does not raise: the default is declared and ``problem`` says
    why."""
    given = getattr(node, "_parameter_overrides", {}).get(name)
    given = None if given is None else given.value
    problem = None if given is None else type_problem(name, given, default)
    if isinstance(default, float) and type(given) is int:  # the double it stands for
        given, problem = float(given), None
    if problem is None and given is not None:
        problem = floor_problem(name, given, floor)
        if problem is not None:
            return node.declare_parameter(name, default, desc, ignore_override=True).value, \
                problem
    if problem is None:
        try:
            value = default if given is None else given
            return node.declare_parameter(name, value, desc, ignore_override=True).value, None
        except InvalidParameterValueException:
            problem = f"parameter {name} must be in {range_text(desc)}, got {given!r}"
    return node.declare_parameter(name, default, desc, ignore_override=True).value, problem


def ints_as_doubles(double_names: Callable[[], Iterable[str]]):
    """A pre-set callback: an integer set on a double parameter becomes that double (ROS
    does not convert, and ``ros2 param set node rate 20`` sends an integer)."""

    def convert(params: List[Parameter]) -> List[Parameter]:
        names = set(double_names())
        return [Parameter(p.name, value=float(p.value))
                if p.name in names and p.type_ == Parameter.Type.INTEGER else p
                for p in params]

    return convert


def param(default: Any, description: str, at_configure: bool = True, fixed: bool = False,
          value_range: Optional[Tuple[Any, Any]] = None,
          zero_or_at_least: Optional[float] = None):
    """A dataclass field that is a node parameter (the arguments of
    :meth:`g2g_ros.managed_node.ManagedNode.declare`; read at configure unless told)."""
    meta = {"description": description, "at_configure": at_configure and not fixed,
            "fixed": fixed, "value_range": value_range, "zero_or_at_least": zero_or_at_least}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def declare_fields(node, params_type) -> None:
    """Declare every field of the dataclass ``params_type`` (made by :func:`param`) on
    ``node`` (a :class:`~g2g_ros.managed_node.ManagedNode`), in field order."""
    for f in dataclasses.fields(params_type):
        m = f.metadata
        node.declare(f.name, field_default(f), m["description"], at_configure=m["at_configure"],
                     fixed=m["fixed"], value_range=m["value_range"],
                     zero_or_at_least=m["zero_or_at_least"])


def read_fields(values: Mapping[str, Any], params_type):
    """An instance of the dataclass ``params_type`` from ``values`` (e.g. a node's ``p``)."""
    return params_type(**{f.name: values[f.name] for f in dataclasses.fields(params_type)})


def status_period_param():
    """The ``status_period_s`` field every node has (read-only after start-up)."""
    return param(1.0, "status/diagnostics period; at least 0.05 s: faster is more than any "
                 "monitor reads, and each report costs CPU also while the node is idle",
                 fixed=True, value_range=(0.05, 3600.0))
