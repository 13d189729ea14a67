"""Jobs and CronJobs: done, failed or suspended, as their conditions and spec say."""

from __future__ import annotations

from gitopsd.health.fields import bool_, conditions_of, int_, true_condition
from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


def job(body: Body) -> Health:
    conditions = conditions_of(body)
    if failed := true_condition(conditions, "Failed"):
        return failed.decides(Status.FAILED)
    # SuccessCriteriaMet comes first when a success policy decides (Kubernetes 1.31 and on).
    for type_ in ("Complete", "SuccessCriteriaMet"):
        if done := true_condition(conditions, type_):
            return done.decides(Status.CURRENT)
    # As in kstatus: a suspended Job is not waiting to finish.
    if bool_(body, "spec.suspend"):
        return Health(Status.CURRENT, "Suspended", "spec.suspend holds the Job")
    return _job_progress(body)


def _job_progress(body: Body) -> Health:
    counts = ("active", "succeeded", "failed")
    active, succeeded, failed = (int_(body, f"status.{count}", 0) for count in counts)
    message = f"active {active}, succeeded {succeeded}, failed {failed}"
    return Health(Status.IN_PROGRESS, "Running" if active else "Pending", message)


def cronjob(body: Body) -> Health:
    if bool_(body, "spec.suspend"):
        return Health(Status.CURRENT, "Suspended", "spec.suspend stops new runs")
    return Health(Status.CURRENT)
