"""Kinds that serve the API itself: CustomResourceDefinition and APIService."""

from __future__ import annotations

from gitopsd.health.fields import conditions_of, must_be_true
from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


def custom_resource_definition(body: Body) -> Health:
    conditions = conditions_of(body)
    names = conditions.get("NamesAccepted")
    if names is not None and names.status == "False":  # a name clash: only a change fixes it
        return names.decides(Status.FAILED)
    return must_be_true(conditions, "Established")


def api_service(body: Body) -> Health:
    return must_be_true(conditions_of(body), "Available")
