"""The rule of kinds without one of their own, custom resources above all: the standard
conditions, Current with none."""

from __future__ import annotations

from gitopsd.health.fields import conditions_of, must_be_true, true_condition
from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


def by_conditions(body: Body) -> Health:
    """kstatus's standard conditions, then the common Ready and Available."""
    conditions = conditions_of(body)
    if stalled := true_condition(conditions, "Stalled"):
        return stalled.decides(Status.FAILED)
    if reconciling := true_condition(conditions, "Reconciling"):
        return reconciling.decides(Status.IN_PROGRESS)
    # Ready=False is InProgress, not Failed: without Stalled, the controller may yet succeed.
    for type_ in ("Ready", "Available"):
        if type_ in conditions:
            return must_be_true(conditions, type_)
    return Health(Status.CURRENT)
